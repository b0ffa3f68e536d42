// LlamaWeights::load converts tensor by tensor from the mapped file; these
// tests check that it packs exactly what packing whole f32 copies of the
// tensors (stacked, LoRA merged in) gives: same bytes, for every storage,
// file dtype, merged adapter and tied embedding.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "adapters/lora_adapter.h"
#include "adapters/synth_adapter.h"
#include "engine/llama_weights.h"
#include "model/safetensors.h"
#include "model/synth_model.h"
#include "tests/engine/same_packing.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

std::string layer_key(int64_t layer, const std::string& suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

std::vector<float> whole_f32(const WeightStore& store, const std::string& name) {
  const TensorView* t = store.find(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  std::vector<float> out(static_cast<size_t>(t->numel()));
  convert_to_f32(t->dtype, t->data, out.data(), out.size());
  return out;
}

// The merge the loader did before it streamed: whole matrix, in double.
void merge_whole(std::vector<float>& w, const LoraWeights& lora) {
  for (int64_t o = 0; o < lora.out; ++o) {
    for (int64_t i = 0; i < lora.in; ++i) {
      double delta = 0;
      for (int64_t r = 0; r < lora.rank; ++r) delta += double(lora.b[o * lora.rank + r]) * lora.a[r * lora.in + i];
      w[o * lora.in + i] = static_cast<float>(w[o * lora.in + i] + lora.scaling * delta);
    }
  }
}

// Whole f32 copies of `names` stacked (each with its LoRA, if any), packed at once.
cpu::PackedMatrix reference_pack(const WeightStore& store, const std::vector<std::string>& names,
                                 const std::vector<const LoraWeights*>& merges, WeightType storage) {
  std::vector<float> stacked;
  int64_t rows = 0, cols = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    std::vector<float> v = whole_f32(store, names[i]);
    if (merges[i] != nullptr) merge_whole(v, *merges[i]);
    rows += store.find(names[i])->shape[0];
    cols = store.find(names[i])->shape[1];
    stacked.insert(stacked.end(), v.begin(), v.end());
  }
  return cpu::PackedMatrix::pack(stacked.data(), DType::kF32, rows, cols, storage);
}

void expect_same_floats(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << what;
}

// Loads `dir` with `storage` (and `merge`) and compares every weight with the reference.
void expect_loaded_as_whole_copies(const std::string& dir, WeightType storage, const LoraAdapter* merge) {
  SCOPED_TRACE(std::string(weight_type_name(storage)) + (merge != nullptr ? " merged" : ""));
  auto config = ModelConfig::load(dir);
  ASSERT_TRUE(config.is_ok()) << config.status().to_string();
  const ModelConfig& c = *config;
  auto store = WeightStore::open_dir(dir);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  auto loaded = LlamaWeights::load(**store, c, storage, merge);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const LlamaWeights& w = **loaded;
  const WeightStore& s = **store;  // its pages were released, not its bytes: still readable
  auto lora = [&](int64_t l, LoraModule m) { return merge != nullptr ? merge->weights(l, m) : nullptr; };

  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& lw = w.layers()[l];
    const std::string at = "layer " + std::to_string(l);
    testing::expect_same_packing(lw.qkv,
                      reference_pack(s,
                                     {layer_key(l, "self_attn.q_proj.weight"), layer_key(l, "self_attn.k_proj.weight"),
                                      layer_key(l, "self_attn.v_proj.weight")},
                                     {lora(l, LoraModule::kQ), lora(l, LoraModule::kK), lora(l, LoraModule::kV)},
                                     storage),
                      at + " qkv");
    testing::expect_same_packing(lw.o, reference_pack(s, {layer_key(l, "self_attn.o_proj.weight")}, {lora(l, LoraModule::kO)}, storage),
                      at + " o");
    testing::expect_same_packing(lw.gate_up,
                      reference_pack(s, {layer_key(l, "mlp.gate_proj.weight"), layer_key(l, "mlp.up_proj.weight")},
                                     {lora(l, LoraModule::kGate), lora(l, LoraModule::kUp)}, storage),
                      at + " gate_up");
    testing::expect_same_packing(lw.down,
                      reference_pack(s, {layer_key(l, "mlp.down_proj.weight")}, {lora(l, LoraModule::kDown)}, storage),
                      at + " down");
    expect_same_floats(lw.input_norm, whole_f32(s, layer_key(l, "input_layernorm.weight")), at + " input norm");
    expect_same_floats(lw.post_attn_norm, whole_f32(s, layer_key(l, "post_attention_layernorm.weight")),
                       at + " post-attention norm");
    if (c.attention_bias) {
      std::vector<float> bias;
      for (const char* b : {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"}) {
        const std::vector<float> part = whole_f32(s, layer_key(l, b));
        bias.insert(bias.end(), part.begin(), part.end());
      }
      expect_same_floats(lw.qkv_bias, bias, at + " qkv bias");
    }
  }
  expect_same_floats(w.final_norm(), whole_f32(s, "model.norm.weight"), "final norm");

  const std::vector<float> embed = whole_f32(s, "model.embed_tokens.weight");
  const std::string head_name = s.find("lm_head.weight") != nullptr ? "lm_head.weight" : "model.embed_tokens.weight";
  testing::expect_same_packing(w.lm_head(), reference_pack(s, {head_name}, {nullptr}, storage), "lm_head (" + head_name + ")");
  std::vector<float> row(static_cast<size_t>(c.hidden_size));
  for (int64_t t = 0; t < c.vocab_size; ++t) {
    w.embed(static_cast<int32_t>(t), row.data());
    for (int64_t k = 0; k < c.hidden_size; ++k) {
      float want = embed[static_cast<size_t>(t * c.hidden_size + k)];
      if (storage != WeightType::kF32) want = bf16_to_f32(f32_to_bf16(want));  // a bf16 table
      uint32_t a = 0, b = 0;
      std::memcpy(&a, &row[static_cast<size_t>(k)], 4);
      std::memcpy(&b, &want, 4);
      ASSERT_EQ(a, b) << "embedding row " << t << " column " << k;
    }
  }
}

TEST(WeightsLoadTest, SynthModelPacksAsWholeTensorCopies) {
  const std::string root = testing::make_temp_dir("lg-weights-load");
  for (DType file_dtype : {DType::kF32, DType::kBF16}) {
    const std::string file_dtype_name(dtype_name(file_dtype));
    SCOPED_TRACE("file " + file_dtype_name);
    const std::string dir = root + "/" + file_dtype_name;
    ASSERT_TRUE(write_synth_model(dir, SynthOptions{"tiny", 41, file_dtype}).is_ok());
    auto config = ModelConfig::load(dir);
    ASSERT_TRUE(config.is_ok());
    SynthAdapterOptions ao;
    ao.rank = 8;
    ao.seed = 42;
    ao.b_std = 0.2;
    ASSERT_TRUE(write_synth_adapter(root + "/adapter", *config, ao).is_ok());
    auto adapter = LoraAdapter::load(root + "/adapter", *config, 16);
    ASSERT_TRUE(adapter.is_ok()) << adapter.status().to_string();
    for (WeightType storage : all_weight_types()) {
      expect_loaded_as_whole_copies(dir, storage, nullptr);
      expect_loaded_as_whole_copies(dir, storage, adapter->get());
    }
  }
  std::filesystem::remove_all(root);
}

// Tied embeddings (no lm_head.weight), q/k/v biases, row counts that are not
// multiples of the 32-row panels, and an F16 file: the paths no preset takes.
TEST(WeightsLoadTest, TiedBiasedF16ModelPacksAsWholeTensorCopies) {
  ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.model_type = "llama";
  c.hidden_size = 48;
  c.intermediate_size = 100;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 6;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.vocab_size = 301;
  c.max_position_embeddings = 128;
  c.tie_word_embeddings = true;
  c.attention_bias = true;
  c.eos_token_ids = {2};

  const std::string dir = testing::make_temp_dir("lg-weights-tied");
  {
    std::ofstream(dir + "/config.json") << c.to_json();
  }
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim,
                f = c.intermediate_size;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<TensorData> tensors;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    TensorData t{name, DType::kF16, std::move(shape), std::vector<uint8_t>(static_cast<size_t>(n) * 2)};
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t half = f32_to_f16(normal(rng));
      std::memcpy(t.bytes.data() + 2 * i, &half, 2);
    }
    tensors.push_back(std::move(t));
  };
  add("model.embed_tokens.weight", {c.vocab_size, h});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    add(layer_key(l, "input_layernorm.weight"), {h});
    add(layer_key(l, "post_attention_layernorm.weight"), {h});
    add(layer_key(l, "self_attn.q_proj.weight"), {q, h});
    add(layer_key(l, "self_attn.k_proj.weight"), {kv, h});
    add(layer_key(l, "self_attn.v_proj.weight"), {kv, h});
    add(layer_key(l, "self_attn.q_proj.bias"), {q});
    add(layer_key(l, "self_attn.k_proj.bias"), {kv});
    add(layer_key(l, "self_attn.v_proj.bias"), {kv});
    add(layer_key(l, "self_attn.o_proj.weight"), {h, q});
    add(layer_key(l, "mlp.gate_proj.weight"), {f, h});
    add(layer_key(l, "mlp.up_proj.weight"), {f, h});
    add(layer_key(l, "mlp.down_proj.weight"), {h, f});
  }
  add("model.norm.weight", {h});
  ASSERT_TRUE(write_safetensors(dir + "/model.safetensors", tensors).is_ok());
  for (WeightType storage : all_weight_types()) expect_loaded_as_whole_copies(dir, storage, nullptr);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace loragate
