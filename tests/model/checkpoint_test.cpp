// The one checkpoint walk: names, shapes, fused groups and the lm_head rule
// that the CPU weights, the CUDA weights, the memory estimate and quantize follow.
#include "model/checkpoint.h"

#include <gtest/gtest.h>

#include "model/synth_model.h"

namespace loragate {
namespace {

ModelConfig tiny() { return synth_preset_config("tiny").value(); }

TEST(CheckpointLayoutTest, NamesEveryTensorWithItsShapeGroupedAsTheRunnersFuseThem) {
  const ModelConfig c = tiny();
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim,
                f = c.intermediate_size;
  Result<CheckpointLayout> layout = checkpoint_layout(c, /*has_lm_head_tensor=*/true);
  ASSERT_TRUE(layout.is_ok()) << layout.status().to_string();
  EXPECT_EQ(layout->embed.name, "model.embed_tokens.weight");
  EXPECT_EQ(layout->embed.shape, (std::vector<int64_t>{c.vocab_size, h}));
  ASSERT_EQ(static_cast<int64_t>(layout->layers.size()), c.num_hidden_layers);
  const LayerTensors& l1 = layout->layers[1];
  EXPECT_EQ(l1.input_norm.name, "model.layers.1.input_layernorm.weight");
  EXPECT_EQ(l1.post_attention_norm.name, "model.layers.1.post_attention_layernorm.weight");
  EXPECT_TRUE(l1.qkv_bias.empty());
  EXPECT_EQ(l1.qkv[0].name, "model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(l1.qkv[0].rows, q);
  EXPECT_EQ(l1.qkv[1].rows, kv);
  EXPECT_EQ(l1.qkv[2].name, "model.layers.1.self_attn.v_proj.weight");
  EXPECT_EQ(l1.o.rows, h);
  EXPECT_EQ(l1.o.cols, q);
  EXPECT_EQ(l1.gate_up[1].name, "model.layers.1.mlp.up_proj.weight");
  EXPECT_EQ(l1.gate_up[1].rows, f);
  EXPECT_EQ(l1.down.cols, f);
  EXPECT_EQ(layout->final_norm.name, "model.norm.weight");
  EXPECT_EQ(layout->lm_head.name, "lm_head.weight");
  EXPECT_EQ(layout->lm_head_source, LmHeadSource::kOwnTensor);
}

TEST(CheckpointLayoutTest, LinearsAreSevenPerLayerInFileOrderThenTheLmHead) {
  const ModelConfig c = tiny();
  const std::vector<LinearTensor> linears = checkpoint_layout(c, true)->linears();
  ASSERT_EQ(static_cast<int64_t>(linears.size()), 7 * c.num_hidden_layers + 1);
  const char* order[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                         "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    for (size_t i = 0; i < 7; ++i) {
      EXPECT_EQ(linears[static_cast<size_t>(l) * 7 + i].name, layer_tensor_name(l, order[i]) + ".weight");
    }
  }
  EXPECT_EQ(linears.back().name, "lm_head.weight");
}

TEST(CheckpointLayoutTest, AttentionBiasAddsQkvBiases) {
  ModelConfig c = tiny();
  c.attention_bias = true;
  const LayerTensors l0 = checkpoint_layout(c, true)->layers[0];
  ASSERT_EQ(l0.qkv_bias.size(), 3u);
  EXPECT_EQ(l0.qkv_bias[0].name, "model.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(l0.qkv_bias[1].shape, (std::vector<int64_t>{c.num_key_value_heads * c.head_dim}));
}

TEST(CheckpointLayoutTest, AMissingLmHeadIsTiedOnlyWhenTheConfigTiesIt) {
  ModelConfig c = tiny();
  c.tie_word_embeddings = true;
  Result<CheckpointLayout> tied = checkpoint_layout(c, /*has_lm_head_tensor=*/false);
  ASSERT_TRUE(tied.is_ok());
  EXPECT_EQ(tied->lm_head_source, LmHeadSource::kTiedEmbedding);
  // A file that holds lm_head.weight (every quantised file does) uses it, tied or not.
  EXPECT_EQ(checkpoint_layout(c, true)->lm_head_source, LmHeadSource::kOwnTensor);

  c.tie_word_embeddings = false;
  Result<CheckpointLayout> untied = checkpoint_layout(c, false);
  ASSERT_FALSE(untied.is_ok());
  EXPECT_NE(untied.status().message().find("lm_head.weight"), std::string::npos) << untied.status().to_string();
}

}  // namespace
}  // namespace loragate
