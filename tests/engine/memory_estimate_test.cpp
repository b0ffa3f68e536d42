// estimate_engine_memory: the bytes predicted from config.json before loading
// equal what a loaded Engine holds, for real and synthetic models, f32 and bf16.
#include "engine/memory_estimate.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "model/safetensors.h"
#include "model/synth_model.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

std::string describe(const MemoryEstimate& m) {
  return "weights " + std::to_string(m.weights_bytes) + ", kv " + std::to_string(m.kv_bytes) + ", lora " +
         std::to_string(m.lora_slot_bytes);
}

// Estimates for `dir`'s config, loads the engine and compares.
void expect_estimate_matches(const std::string& dir, const EngineOptions& options) {
  auto config = ModelConfig::load(dir);
  ASSERT_TRUE(config.is_ok()) << config.status().to_string();
  auto estimate = estimate_engine_memory(*config, options);
  ASSERT_TRUE(estimate.is_ok()) << estimate.status().to_string();
  auto engine = Engine::load(dir, options);
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  const MemoryEstimate measured = measure_engine_memory(**engine);
  EXPECT_EQ(*estimate, measured) << "estimated " << describe(*estimate) << "; measured " << describe(measured);
  EXPECT_GT(measured.weights_bytes, 0);
  EXPECT_GT(measured.kv_bytes, 0);
  EXPECT_EQ(measured.lora_slot_bytes > 0, options.max_loras > 0);
}

EngineOptions options_with(WeightType dtype, int32_t max_loras) {
  EngineOptions o;
  o.weight_dtype = dtype;
  o.max_loras = max_loras;
  o.kv_cache_bytes = 3ll << 20;  // not a whole number of blocks
  return o;
}

TEST(MemoryEstimateTest, Stories260KF32AndBf16) {
  LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
  const std::string dir = testing::shared_dir() + "/models/stories260K";
  for (WeightType dtype : all_weight_types()) {
    SCOPED_TRACE(std::string(weight_type_name(dtype)));
    expect_estimate_matches(dir, options_with(dtype, 4));
    expect_estimate_matches(dir, options_with(dtype, 0));
  }
  EngineOptions blocks = options_with(WeightType::kBF16, 2);
  blocks.kv_num_blocks = 37;
  blocks.kv_block_size = 8;
  blocks.max_lora_rank = 5;
  expect_estimate_matches(dir, blocks);
}

TEST(MemoryEstimateTest, Stories260KBytesByHand) {
  LG_REQUIRE_SHARED("models/stories260K/config.json");
  auto config = ModelConfig::load(testing::shared_dir() + "/models/stories260K");
  ASSERT_TRUE(config.is_ok()) << config.status().to_string();
  // hidden 64, intermediate 172, 5 layers, 8 heads / 4 KV heads of 8, vocab 512, tied.
  EngineOptions o = options_with(WeightType::kF32, 4);
  auto e = estimate_engine_memory(*config, o);
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  // Per layer: qkv 128 rows, o 64, gate_up 344 -> 352 (32-row panels), down 64; norms 2 * 64.
  const int64_t layer = (128 * 64 + 64 * 64 + 352 * 64 + 64 * 172) * 4 + 2 * 64 * 4;
  EXPECT_EQ(e->weights_bytes, 512 * 64 * 4 + 5 * layer + 64 * 4 + 512 * 64 * 4);
  const int64_t per_block = 2 * 5 * 16 * 4 * 8 * 4;  // K and V, layers, tokens, KV heads, head_dim, f32
  EXPECT_EQ(e->kv_bytes, (o.kv_cache_bytes / per_block) * per_block);
  // LoRA A and B^T per layer: q 64+64, k 64+32, v 64+32, o 64+64, gate 64+172, up 64+172, down 172+64.
  EXPECT_EQ(e->lora_slot_bytes, int64_t{5} * 4 * 16 * (128 + 96 + 96 + 128 + 236 + 236 + 236) * 4);
  EXPECT_EQ(e->total(), e->weights_bytes + e->kv_bytes + e->lora_slot_bytes);
}

TEST(MemoryEstimateTest, SynthTinyUntied) {
  const std::string dir = testing::make_temp_dir("lg_memory_synth");
  ASSERT_TRUE(write_synth_model(dir, SynthOptions{"tiny", 3, DType::kBF16}).is_ok());
  for (WeightType dtype : all_weight_types()) {
    SCOPED_TRACE(std::string(weight_type_name(dtype)));
    expect_estimate_matches(dir, options_with(dtype, 3));
  }
  std::filesystem::remove_all(dir);
}

// A config no preset has: q/k/v biases, tied embeddings without lm_head.weight,
// row counts that are not multiples of the 32-row panels.
TEST(MemoryEstimateTest, SyntheticBiasedTiedModel) {
  ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.model_type = "llama";
  c.hidden_size = 48;
  c.intermediate_size = 100;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 6;
  c.num_key_value_heads = 2;
  c.head_dim = 10;
  c.vocab_size = 301;
  c.max_position_embeddings = 128;
  c.tie_word_embeddings = true;
  c.attention_bias = true;
  c.eos_token_ids = {2};

  const std::string dir = testing::make_temp_dir("lg_memory_bias");
  {
    std::ofstream(dir + "/config.json") << c.to_json();
  }
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim,
                f = c.intermediate_size;
  std::vector<TensorData> tensors;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> values(static_cast<size_t>(n), 0.01f);
    TensorData t{name, DType::kF32, std::move(shape), std::vector<uint8_t>(static_cast<size_t>(n) * 4)};
    std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    tensors.push_back(std::move(t));
  };
  add("model.embed_tokens.weight", {c.vocab_size, h});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {h});
    add(p + "post_attention_layernorm.weight", {h});
    add(p + "self_attn.q_proj.weight", {q, h});
    add(p + "self_attn.k_proj.weight", {kv, h});
    add(p + "self_attn.v_proj.weight", {kv, h});
    add(p + "self_attn.q_proj.bias", {q});
    add(p + "self_attn.k_proj.bias", {kv});
    add(p + "self_attn.v_proj.bias", {kv});
    add(p + "self_attn.o_proj.weight", {h, q});
    add(p + "mlp.gate_proj.weight", {f, h});
    add(p + "mlp.up_proj.weight", {f, h});
    add(p + "mlp.down_proj.weight", {h, f});
  }
  add("model.norm.weight", {h});
  ASSERT_TRUE(write_safetensors(dir + "/model.safetensors", tensors).is_ok());

  for (WeightType dtype : all_weight_types()) {
    SCOPED_TRACE(std::string(weight_type_name(dtype)));
    EngineOptions o = options_with(dtype, 2);
    o.max_lora_rank = 7;
    o.kv_block_size = 4;
    expect_estimate_matches(dir, o);
  }
  std::filesystem::remove_all(dir);
}

TEST(MemoryEstimateTest, RefusesWhatLoadRefuses) {
  auto config = synth_preset_config("tiny");
  ASSERT_TRUE(config.is_ok());
  EXPECT_TRUE(estimate_engine_memory(*config, EngineOptions{}).is_ok());

  EngineOptions o;
  o.kv_cache_bytes = 100;  // less than one block
  auto tiny_budget = estimate_engine_memory(*config, o);
  ASSERT_FALSE(tiny_budget.is_ok());
  EXPECT_NE(tiny_budget.status().message().find("holds no block"), std::string::npos);
  o = EngineOptions{};
  o.kv_block_size = 0;
  EXPECT_FALSE(estimate_engine_memory(*config, o).is_ok());
  o = EngineOptions{};
  o.max_lora_rank = 0;
  EXPECT_FALSE(estimate_engine_memory(*config, o).is_ok());

  ModelConfig empty;
  auto bad = estimate_engine_memory(empty, EngineOptions{});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("hidden_size"), std::string::npos);
}

}  // namespace
}  // namespace loragate
