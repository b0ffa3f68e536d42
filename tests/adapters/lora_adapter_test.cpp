// LoraAdapter::load: synthetic adapters (dtypes, rslora, patterns, layer
// subsets, regex targets), every kind of bad adapter we refuse (with the code
// and a message naming the file and the tensor or key), and the real
// stories260K and eval adapters from ../shared.
#include "adapters/lora_adapter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "tests/adapters/adapter_fixtures.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::fake_adapter;
using testing::fake_lora;
using testing::lora_config;
using testing::lora_key;

#define EXPECT_MSG_HAS(status, text) \
  EXPECT_NE((status).message().find(text), std::string::npos) << (status).to_string()

const std::vector<LoraModule> kAll(kAllLoraModules.begin(), kAllLoraModules.end());
const std::vector<std::string> kAllNames = {"q_proj", "k_proj", "v_proj", "o_proj",
                                            "gate_proj", "up_proj", "down_proj"};

class LoraAdapterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::make_temp_dir("lg-adapter");
    ASSERT_FALSE(root_.empty());
    dir_ = root_ + "/tenant-x";
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  void write(const json& config, const std::vector<TensorData>& tensors) {
    ASSERT_TRUE(testing::write_adapter(dir_, config, tensors).is_ok());
  }
  Result<std::shared_ptr<const LoraAdapter>> load(int64_t max_rank = 64) {
    return LoraAdapter::load(dir_, base_, max_rank);
  }
  // Loads and expects failure with `code`; returns the Status.
  Status expect_error(StatusCode code, int64_t max_rank = 64) {
    auto r = load(max_rank);
    EXPECT_FALSE(r.is_ok());
    if (r.is_ok()) return Status::internal("loaded");
    EXPECT_EQ(r.status().code(), code) << r.status().to_string();
    return r.status();
  }
  std::string weights_file() const { return dir_ + "/adapter_model.safetensors"; }

  std::string root_, dir_;
  ModelConfig base_ = testing::tiny_base();
};

void expect_weights_equal(const LoraWeights& w, int64_t layer, LoraModule m) {
  ASSERT_EQ(w.a.size(), static_cast<size_t>(w.rank * w.in));
  ASSERT_EQ(w.b.size(), static_cast<size_t>(w.out * w.rank));
  for (size_t i = 0; i < w.a.size(); ++i) ASSERT_EQ(w.a[i], testing::fake_value(layer, m, true, i)) << i;
  for (size_t i = 0; i < w.b.size(); ++i) ASSERT_EQ(w.b[i], testing::fake_value(layer, m, false, i)) << i;
}

// --- good adapters -----------------------------------------------------------------

TEST_F(LoraAdapterTest, LoadsAllSevenModules) {
  write(lora_config(4, 8, kAllNames), fake_adapter(base_, kAll, 4));
  auto r = load();
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const LoraAdapter& a = **r;
  EXPECT_EQ(a.name(), "tenant-x");
  EXPECT_EQ(a.path(), dir_);
  EXPECT_EQ(a.num_layers(), 2);
  EXPECT_EQ(a.num_targets(), 14);
  EXPECT_EQ(a.max_rank(), 4);
  size_t bytes = 0;
  for (int64_t layer = 0; layer < 2; ++layer) {
    for (LoraModule m : kAll) {
      SCOPED_TRACE(lora_module_path(layer, m));
      const LoraWeights* w = a.weights(layer, m);
      ASSERT_NE(w, nullptr);
      EXPECT_EQ(w->rank, 4);
      EXPECT_FLOAT_EQ(w->scaling, 2.0f);
      EXPECT_EQ(w->in, in_features(m, base_));
      EXPECT_EQ(w->out, out_features(m, base_));
      expect_weights_equal(*w, layer, m);
      bytes += w->bytes();
    }
  }
  // (8+8+8+8+8+8+12) * 4 (A) + (8+4+4+8+12+12+8) * 4 (B) floats per layer.
  EXPECT_EQ(bytes, size_t{2} * (60 + 56) * 4 * sizeof(float));
  EXPECT_EQ(a.bytes(), bytes);
  EXPECT_EQ(a.weights(2, LoraModule::kQ), nullptr);
  EXPECT_EQ(a.weights(-1, LoraModule::kQ), nullptr);
}

TEST_F(LoraAdapterTest, TrailingSlashKeepsTheName) {
  write(lora_config(2, 2, {"q_proj"}), fake_adapter(base_, {LoraModule::kQ}, 2));
  auto r = LoraAdapter::load(dir_ + "/", base_, 8);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ((*r)->name(), "tenant-x");
}

TEST_F(LoraAdapterTest, ConvertsF16AndBF16) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    write(lora_config(4, 4, {"q_proj", "down_proj"}),
          fake_adapter(base_, {LoraModule::kQ, LoraModule::kDown}, 4, dtype));
    auto r = load();
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    expect_weights_equal(*(*r)->weights(1, LoraModule::kDown), 1, LoraModule::kDown);
    expect_weights_equal(*(*r)->weights(0, LoraModule::kQ), 0, LoraModule::kQ);
    EXPECT_EQ((*r)->weights(0, LoraModule::kK), nullptr);
  }
}

TEST_F(LoraAdapterTest, MixedDtypesAndPeftInMemoryKeys) {
  std::vector<TensorData> t = fake_adapter(base_, {LoraModule::kV}, 2);
  t[0] = fake_lora(base_, 0, LoraModule::kV, true, 2, DType::kBF16);
  t[3].name = "base_model.model.model.layers.1.self_attn.v_proj.lora_B.default.weight";
  write(lora_config(2, 2, {"v_proj"}), t);
  auto r = load();
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  expect_weights_equal(*(*r)->weights(0, LoraModule::kV), 0, LoraModule::kV);
  expect_weights_equal(*(*r)->weights(1, LoraModule::kV), 1, LoraModule::kV);
}

TEST_F(LoraAdapterTest, RsloraScaling) {
  json config = lora_config(16, 8, {"q_proj"});
  config["use_rslora"] = true;
  write(config, fake_adapter(base_, {LoraModule::kQ}, 16));
  auto r = load();
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_FLOAT_EQ((*r)->weights(0, LoraModule::kQ)->scaling, 2.0f);  // 8 / sqrt(16)
}

TEST_F(LoraAdapterTest, RankAndAlphaPatternsGiveModulesTheirOwnRank) {
  json config = lora_config(4, 8, {"q_proj", "v_proj", "down_proj"});
  config["rank_pattern"] = {{"v_proj", 2}, {"model.layers.1.mlp.down_proj", 8}};
  config["alpha_pattern"] = {{"q_proj", 16}};
  std::vector<TensorData> t;
  for (int64_t layer = 0; layer < 2; ++layer) {
    const int64_t down_rank = layer == 1 ? 8 : 4;
    for (bool is_a : {true, false}) {
      t.push_back(fake_lora(base_, layer, LoraModule::kQ, is_a, 4));
      t.push_back(fake_lora(base_, layer, LoraModule::kV, is_a, 2));
      t.push_back(fake_lora(base_, layer, LoraModule::kDown, is_a, down_rank));
    }
  }
  write(config, t);
  auto r = load();
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const LoraAdapter& a = **r;
  EXPECT_EQ(a.weights(0, LoraModule::kQ)->rank, 4);
  EXPECT_FLOAT_EQ(a.weights(0, LoraModule::kQ)->scaling, 4.0f);   // 16 / 4
  EXPECT_EQ(a.weights(1, LoraModule::kV)->rank, 2);
  EXPECT_FLOAT_EQ(a.weights(1, LoraModule::kV)->scaling, 4.0f);   // 8 / 2
  EXPECT_EQ(a.weights(0, LoraModule::kDown)->rank, 4);
  EXPECT_FLOAT_EQ(a.weights(0, LoraModule::kDown)->scaling, 2.0f);
  EXPECT_EQ(a.weights(1, LoraModule::kDown)->rank, 8);
  EXPECT_FLOAT_EQ(a.weights(1, LoraModule::kDown)->scaling, 1.0f);
  EXPECT_EQ(a.max_rank(), 8);
  expect_weights_equal(*a.weights(1, LoraModule::kDown), 1, LoraModule::kDown);

  // The same adapter with the down_proj rank-8 tensors but no rank_pattern for them.
  config["rank_pattern"] = {{"v_proj", 2}};
  write(config, t);
  Status s = expect_error(StatusCode::kCorrupt);
  EXPECT_MSG_HAS(s, lora_key(1, LoraModule::kDown, true));
  EXPECT_MSG_HAS(s, "r=4");
}

TEST_F(LoraAdapterTest, LayersToTransformSubset) {
  json config = lora_config(2, 4, {"k_proj", "up_proj"});
  config["layers_to_transform"] = {1};
  std::vector<TensorData> t;
  for (LoraModule m : {LoraModule::kK, LoraModule::kUp}) {
    t.push_back(fake_lora(base_, 1, m, true, 2));
    t.push_back(fake_lora(base_, 1, m, false, 2));
  }
  write(config, t);
  auto r = load();
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ((*r)->num_targets(), 2);
  EXPECT_EQ((*r)->weights(0, LoraModule::kK), nullptr);
  ASSERT_NE((*r)->weights(1, LoraModule::kUp), nullptr);
  expect_weights_equal(*(*r)->weights(1, LoraModule::kUp), 1, LoraModule::kUp);

  // A layer-0 tensor is then for a module the config does not target.
  t.push_back(fake_lora(base_, 0, LoraModule::kK, true, 2));
  write(config, t);
  Status s = expect_error(StatusCode::kCorrupt);
  EXPECT_MSG_HAS(s, lora_key(0, LoraModule::kK, true));
  EXPECT_MSG_HAS(s, "does not target");

  // And a layer the base does not have.
  config["layers_to_transform"] = {1, 5};
  write(config, {});
  s = expect_error(StatusCode::kInvalidArgument);
  EXPECT_MSG_HAS(s, "layers_to_transform");
  EXPECT_MSG_HAS(s, "layer 5");
}

TEST_F(LoraAdapterTest, RegexTargetModules) {
  json config = lora_config(2, 2, {});
  config["target_modules"] = R"(model\.layers\.1\.(self_attn\.o|mlp\.gate)_proj)";
  std::vector<TensorData> t;
  for (LoraModule m : {LoraModule::kO, LoraModule::kGate}) {
    t.push_back(fake_lora(base_, 1, m, true, 2));
    t.push_back(fake_lora(base_, 1, m, false, 2));
  }
  write(config, t);
  auto r = load();
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ((*r)->num_targets(), 2);
  EXPECT_NE((*r)->weights(1, LoraModule::kO), nullptr);
  EXPECT_NE((*r)->weights(1, LoraModule::kGate), nullptr);
  EXPECT_EQ((*r)->weights(0, LoraModule::kO), nullptr);

  config["target_modules"] = R"(model\.layers\.7\..*)";  // matches nothing in a 2-layer base
  write(config, {});
  Status s = expect_error(StatusCode::kInvalidArgument);
  EXPECT_MSG_HAS(s, "selects no module");
}

// --- bad adapters --------------------------------------------------------------------

TEST_F(LoraAdapterTest, WrongAShape) {
  std::vector<TensorData> t = fake_adapter(base_, {LoraModule::kQ, LoraModule::kDown}, 4);
  // layer 1 down_proj A should be [4, 12]; make it [4, 8] (trained for another intermediate size).
  for (TensorData& d : t) {
    if (d.name == lora_key(1, LoraModule::kDown, true)) {
      d.shape = {4, 8};
      d.bytes.resize(4 * 8 * 4);
    }
  }
  write(lora_config(4, 4, {"q_proj", "down_proj"}), t);
  Status s = expect_error(StatusCode::kInvalidArgument);
  EXPECT_MSG_HAS(s, lora_key(1, LoraModule::kDown, true));
  EXPECT_MSG_HAS(s, "[4, 8]");
  EXPECT_MSG_HAS(s, "[4, 12]");
  EXPECT_MSG_HAS(s, weights_file());
}

TEST_F(LoraAdapterTest, WrongBShape) {
  std::vector<TensorData> t = fake_adapter(base_, {LoraModule::kK}, 4);
  // k_proj B should be [4 (kv_heads*head_dim), 4]; [8, 4] is q's out size.
  t[1] = fake_lora(base_, 0, LoraModule::kQ, false, 4);
  t[1].name = lora_key(0, LoraModule::kK, false);
  write(lora_config(4, 4, {"k_proj"}), t);
  Status s = expect_error(StatusCode::kInvalidArgument);
  EXPECT_MSG_HAS(s, lora_key(0, LoraModule::kK, false));
  EXPECT_MSG_HAS(s, "[8, 4]");
  EXPECT_MSG_HAS(s, "[4, 4]");
}

TEST_F(LoraAdapterTest, RankDisagreesWithConfig) {
  write(lora_config(4, 4, {"q_proj"}), fake_adapter(base_, {LoraModule::kQ}, 8));
  Status s = expect_error(StatusCode::kCorrupt);
  EXPECT_MSG_HAS(s, lora_key(0, LoraModule::kQ, true));
  EXPECT_MSG_HAS(s, "r=4");
}

TEST_F(LoraAdapterTest, MissingB) {
  std::vector<TensorData> t = fake_adapter(base_, {LoraModule::kQ, LoraModule::kV}, 2);
  std::erase_if(t, [](const TensorData& d) { return d.name == lora_key(1, LoraModule::kV, false); });
  write(lora_config(2, 2, {"q_proj", "v_proj"}), t);
  Status s = expect_error(StatusCode::kCorrupt);
  EXPECT_MSG_HAS(s, "missing tensor '" + lora_key(1, LoraModule::kV, false) + "'");
  EXPECT_MSG_HAS(s, weights_file());
}

TEST_F(LoraAdapterTest, MissingWholeModule) {
  // Configured for q and v, file has q only.
  write(lora_config(2, 2, {"q_proj", "v_proj"}), fake_adapter(base_, {LoraModule::kQ}, 2));
  Status s = expect_error(StatusCode::kCorrupt);
  EXPECT_MSG_HAS(s, lora_key(0, LoraModule::kV, true));
}

TEST_F(LoraAdapterTest, RankOverMax) {
  write(lora_config(16, 16, {"q_proj"}), fake_adapter(base_, {LoraModule::kQ}, 16));
  Status s = expect_error(StatusCode::kInvalidArgument, 8);
  EXPECT_MSG_HAS(s, "rank 16");
  EXPECT_MSG_HAS(s, "max_rank 8");
  EXPECT_MSG_HAS(s, "model.layers.0.self_attn.q_proj");
  EXPECT_TRUE(load(16).is_ok());
  EXPECT_EQ(load(0).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(LoraAdapterTest, RankPatternOverMax) {
  json config = lora_config(4, 4, {"q_proj", "o_proj"});
  config["rank_pattern"] = {{"o_proj", 32}};
  write(config, {});
  Status s = expect_error(StatusCode::kInvalidArgument, 16);
  EXPECT_MSG_HAS(s, "o_proj has rank 32");
  EXPECT_MSG_HAS(s, "max_rank 16");
}

TEST_F(LoraAdapterTest, LayerIndexOutOfRange) {
  std::vector<TensorData> t = fake_adapter(base_, {LoraModule::kQ}, 2);
  t.push_back(fake_lora(base_, 2, LoraModule::kQ, true, 2));
  write(lora_config(2, 2, {"q_proj"}), t);
  Status s = expect_error(StatusCode::kInvalidArgument);
  EXPECT_MSG_HAS(s, lora_key(2, LoraModule::kQ, true));
  EXPECT_MSG_HAS(s, "2 layers");
}

TEST_F(LoraAdapterTest, UnknownTargetModuleInConfig) {
  for (const char* name : {"embed_tokens", "lm_head", "qkv_proj"}) {
    SCOPED_TRACE(name);
    write(lora_config(2, 2, {"q_proj", name}), fake_adapter(base_, {LoraModule::kQ}, 2));
    Status s = expect_error(StatusCode::kUnsupported);
    EXPECT_MSG_HAS(s, std::string("'") + name + "'");
    EXPECT_MSG_HAS(s, "adapter_config.json");
  }
}

TEST_F(LoraAdapterTest, TensorForUnknownModule) {
  std::vector<TensorData> t = fake_adapter(base_, {LoraModule::kQ}, 2);
  TensorData extra = fake_lora(base_, 0, LoraModule::kQ, true, 2);
  extra.name = "base_model.model.model.layers.0.self_attn.qkv_proj.lora_A.weight";
  t.push_back(extra);
  write(lora_config(2, 2, {"q_proj"}), t);
  Status s = expect_error(StatusCode::kUnsupported);
  EXPECT_MSG_HAS(s, extra.name);
  EXPECT_MSG_HAS(s, "qkv_proj");
}

TEST_F(LoraAdapterTest, TensorForNonTargetedModule) {
  std::vector<TensorData> t = fake_adapter(base_, {LoraModule::kQ, LoraModule::kGate}, 2);
  write(lora_config(2, 2, {"q_proj"}), t);
  Status s = expect_error(StatusCode::kCorrupt);
  EXPECT_MSG_HAS(s, lora_key(0, LoraModule::kGate, true));
  EXPECT_MSG_HAS(s, "does not target");
}

TEST_F(LoraAdapterTest, UnexpectedTensorNames) {
  const char* names[] = {
      "base_model.model.model.layers.0.self_attn.q_proj.weight",          // a base weight
      "model.layers.0.self_attn.q_proj.lora_A.weight",                    // no PEFT prefix
      "base_model.model.model.layers.00.self_attn.q_proj.lora_A.weight",  // odd index
      "base_model.model.model.layers.x.self_attn.q_proj.lora_A.weight",
      "base_model.model.model.layers.0.self_attn.q_proj.lora_C.weight",
      "base_model.model.model.layers.0.self_attn.q_proj.lora_A.other.weight",
      "base_model.model.model.layers.0.mlp.q_proj.lora_A.weight",  // wrong block
  };
  for (const char* name : names) {
    SCOPED_TRACE(name);
    std::vector<TensorData> t = fake_adapter(base_, {LoraModule::kQ}, 2);
    TensorData extra = fake_lora(base_, 0, LoraModule::kQ, true, 2);
    extra.name = name;
    t.push_back(extra);
    write(lora_config(2, 2, {"q_proj"}), t);
    Status s = expect_error(StatusCode::kCorrupt);
    EXPECT_MSG_HAS(s, name);
  }
}

TEST_F(LoraAdapterTest, DuplicateWeight) {
  std::vector<TensorData> t = fake_adapter(base_, {LoraModule::kQ}, 2);
  TensorData dup = t[0];
  dup.name = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight";
  t.push_back(dup);
  write(lora_config(2, 2, {"q_proj"}), t);
  Status s = expect_error(StatusCode::kCorrupt);
  EXPECT_MSG_HAS(s, dup.name);
  EXPECT_MSG_HAS(s, lora_key(0, LoraModule::kQ, true));
}

TEST_F(LoraAdapterTest, DoraConfig) {
  json config = lora_config(2, 2, {"q_proj"});
  config["use_dora"] = true;
  write(config, fake_adapter(base_, {LoraModule::kQ}, 2));
  Status s = expect_error(StatusCode::kUnsupported);
  EXPECT_MSG_HAS(s, "DoRA adapters are not supported");
}

TEST_F(LoraAdapterTest, DoraMagnitudeTensor) {
  std::vector<TensorData> t = fake_adapter(base_, {LoraModule::kQ}, 2);
  TensorData mag = testing::make_tensor(
      "base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector", DType::kF32, {8},
      std::vector<float>(8, 1.0f));
  t.push_back(mag);
  write(lora_config(2, 2, {"q_proj"}), t);
  Status s = expect_error(StatusCode::kUnsupported);
  EXPECT_MSG_HAS(s, mag.name);
  EXPECT_MSG_HAS(s, "DoRA");
}

TEST_F(LoraAdapterTest, ModulesToSave) {
  json config = lora_config(2, 2, {"q_proj"});
  config["modules_to_save"] = {"lm_head"};
  write(config, fake_adapter(base_, {LoraModule::kQ}, 2));
  Status s = expect_error(StatusCode::kUnsupported);
  EXPECT_MSG_HAS(s, "modules_to_save");
  EXPECT_MSG_HAS(s, "lm_head");
}

TEST_F(LoraAdapterTest, EmbeddingAndHeadTensors) {
  const std::vector<std::pair<std::string, std::vector<int64_t>>> extras = {
      {"base_model.model.model.embed_tokens.lora_embedding_A", {2, 32}},
      {"base_model.model.model.embed_tokens.lora_embedding_B", {8, 2}},
      {"base_model.model.lm_head.lora_A.weight", {2, 8}},
      {"base_model.model.lm_head.modules_to_save.default.weight", {32, 8}},
  };
  for (const auto& [name, shape] : extras) {
    SCOPED_TRACE(name);
    std::vector<TensorData> t = fake_adapter(base_, {LoraModule::kQ}, 2);
    t.push_back(testing::make_tensor(name, DType::kF32, shape,
                                     std::vector<float>(static_cast<size_t>(shape[0] * shape[1]), 0.5f)));
    write(lora_config(2, 2, {"q_proj"}), t);
    Status s = expect_error(StatusCode::kUnsupported);
    EXPECT_MSG_HAS(s, name);
    EXPECT_MSG_HAS(s, weights_file());
  }
}

TEST_F(LoraAdapterTest, LoraBiasTensor) {
  std::vector<TensorData> t = fake_adapter(base_, {LoraModule::kQ}, 2);
  t.push_back(testing::make_tensor("base_model.model.model.layers.0.self_attn.q_proj.lora_B.bias",
                                   DType::kF32, {8}, std::vector<float>(8, 0.0f)));
  write(lora_config(2, 2, {"q_proj"}), t);
  Status s = expect_error(StatusCode::kUnsupported);
  EXPECT_MSG_HAS(s, "q_proj.lora_B.bias");
}

TEST_F(LoraAdapterTest, NonFiniteValues) {
  std::vector<TensorData> t = fake_adapter(base_, {LoraModule::kQ}, 2);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(t[3].bytes.data() + 4 * 5, &nan, 4);  // layer 1 q B, element 5
  write(lora_config(2, 2, {"q_proj"}), t);
  Status s = expect_error(StatusCode::kCorrupt);
  EXPECT_MSG_HAS(s, lora_key(1, LoraModule::kQ, false));
  EXPECT_MSG_HAS(s, "element 5");
}

TEST_F(LoraAdapterTest, InfinityInHalfPrecisionIsRefusedByName) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    std::vector<TensorData> t = fake_adapter(base_, {LoraModule::kV}, 2, dtype);
    const uint16_t inf = dtype == DType::kF16 ? f32_to_f16(-std::numeric_limits<float>::infinity())
                                              : f32_to_bf16(-std::numeric_limits<float>::infinity());
    std::memcpy(t[0].bytes.data() + 2 * 3, &inf, 2);  // layer 0 v A, element 3
    write(lora_config(2, 2, {"v_proj"}), t);
    Status s = expect_error(StatusCode::kCorrupt);
    EXPECT_MSG_HAS(s, lora_key(0, LoraModule::kV, true));
    EXPECT_MSG_HAS(s, "non-finite value at element 3");
  }
}

// Safetensors files may hold integer tensors (quantised bases); an adapter's are refused.
TEST_F(LoraAdapterTest, IntegerTensorsAreRefusedByName) {
  std::vector<TensorData> t = fake_adapter(base_, {LoraModule::kQ}, 2);
  t[0].dtype = DType::kU8;
  t[0].bytes.resize(t[0].bytes.size() / 4);  // the same shape, one byte per element
  write(lora_config(2, 2, {"q_proj"}), t);
  Status s = expect_error(StatusCode::kInvalidArgument);
  EXPECT_MSG_HAS(s, "expected a float tensor");
}

TEST_F(LoraAdapterTest, PeftTypeOtherThanLora) {
  json config = lora_config(2, 2, {"q_proj"});
  config["peft_type"] = "ADALORA";
  write(config, fake_adapter(base_, {LoraModule::kQ}, 2));
  Status s = expect_error(StatusCode::kUnsupported);
  EXPECT_MSG_HAS(s, "ADALORA");
  EXPECT_MSG_HAS(s, "peft_type");
}

TEST_F(LoraAdapterTest, BinOnly) {
  testing::write_text(dir_ + "/adapter_config.json", lora_config(2, 2, {"q_proj"}).dump());
  testing::write_text(dir_ + "/adapter_model.bin", "PK\x03\x04 not really a pickle");
  Status s = expect_error(StatusCode::kUnsupported);
  EXPECT_MSG_HAS(s, "pickle .bin adapters are not supported; convert to safetensors");
  EXPECT_MSG_HAS(s, "adapter_model.bin");
}

TEST_F(LoraAdapterTest, NoWeightsFile) {
  testing::write_text(dir_ + "/adapter_config.json", lora_config(2, 2, {"q_proj"}).dump());
  Status s = expect_error(StatusCode::kNotFound);
  EXPECT_MSG_HAS(s, "adapter_model.safetensors");
}

TEST_F(LoraAdapterTest, MissingConfig) {
  ASSERT_TRUE(write_safetensors(weights_file(), fake_adapter(base_, {LoraModule::kQ}, 2)).is_ok());
  Status s = expect_error(StatusCode::kNotFound);
  EXPECT_MSG_HAS(s, dir_ + "/adapter_config.json");
}

TEST_F(LoraAdapterTest, MissingDirectory) {
  auto r = LoraAdapter::load(root_ + "/nope", base_, 8);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_MSG_HAS(r.status(), root_ + "/nope");
}

TEST_F(LoraAdapterTest, InvalidJson) {
  ASSERT_TRUE(write_safetensors(weights_file(), fake_adapter(base_, {LoraModule::kQ}, 2)).is_ok());
  testing::write_text(dir_ + "/adapter_config.json", "{\"peft_type\": \"LORA\", \"r\": 2,,}");
  Status s = expect_error(StatusCode::kCorrupt);
  EXPECT_MSG_HAS(s, "adapter_config.json");
  EXPECT_MSG_HAS(s, "JSON");
}

TEST_F(LoraAdapterTest, GarbageSafetensors) {
  testing::write_text(dir_ + "/adapter_config.json", lora_config(2, 2, {"q_proj"}).dump());
  testing::write_text(weights_file(), "this is not a safetensors file at all");
  auto r = load();
  ASSERT_FALSE(r.is_ok());
  EXPECT_MSG_HAS(r.status(), weights_file());
}

// --- real adapters from ../shared ------------------------------------------------------

struct RealCase {
  const char* name;
  int64_t rank;
  float scaling;
  std::vector<LoraModule> modules;
};

// The value of element (row, col) of `name`, read straight from the file's bytes.
float raw_f32(const SafetensorsFile& f, const std::string& name, int64_t row, int64_t col) {
  const TensorView* t = f.find(name);
  EXPECT_NE(t, nullptr) << name;
  if (!t) return NAN;
  EXPECT_EQ(t->dtype, DType::kF32);
  float v;
  std::memcpy(&v, t->data + static_cast<size_t>(row * t->shape[1] + col) * 4, 4);
  return v;
}

TEST(LoraAdapterRealTest, Stories260KAdapters) {
  LG_REQUIRE_SHARED("models/stories260K-lora/a/adapter_config.json");
  const std::string models = testing::shared_dir() + "/models";
  auto base = ModelConfig::load(models + "/stories260K");
  ASSERT_TRUE(base.is_ok()) << base.status().to_string();
  using M = LoraModule;
  const RealCase cases[] = {
      {"a", 8, 2.0f, {M::kQ, M::kK, M::kV, M::kO}},
      {"b", 16, 0.5f, {M::kQ, M::kK, M::kV, M::kO, M::kGate, M::kUp, M::kDown}},
      {"c", 4, 3.0f, {M::kQ, M::kV}},
  };
  for (const RealCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string dir = models + "/stories260K-lora/" + c.name;
    auto r = LoraAdapter::load(dir, *base, 16);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const LoraAdapter& a = **r;
    EXPECT_EQ(a.name(), c.name);
    EXPECT_EQ(a.max_rank(), c.rank);
    EXPECT_EQ(a.num_targets(), static_cast<int64_t>(5 * c.modules.size()));
    size_t bytes = 0;
    for (int64_t layer = 0; layer < 5; ++layer) {
      for (M m : kAllLoraModules) {
        const LoraWeights* w = a.weights(layer, m);
        const bool targeted = std::find(c.modules.begin(), c.modules.end(), m) != c.modules.end();
        ASSERT_EQ(w != nullptr, targeted) << lora_module_path(layer, m);
        if (!w) continue;
        EXPECT_EQ(w->rank, c.rank);
        EXPECT_FLOAT_EQ(w->scaling, c.scaling);
        bytes += w->bytes();
      }
    }
    EXPECT_EQ(a.bytes(), bytes);

    // Spot-check against the file's own bytes, and compare whole tensors.
    auto file = SafetensorsFile::open(dir + "/adapter_model.safetensors");
    ASSERT_TRUE(file.is_ok()) << file.status().to_string();
    EXPECT_EQ((*file)->tensors().size(), 2 * 5 * c.modules.size());
    const LoraWeights* v3 = a.weights(3, M::kV);
    ASSERT_NE(v3, nullptr);
    ASSERT_EQ(v3->in, 64);
    ASSERT_EQ(v3->out, 32);
    EXPECT_EQ(v3->a[static_cast<size_t>((c.rank - 1) * 64 + 17)],
              raw_f32(**file, lora_key(3, M::kV, true), c.rank - 1, 17));
    EXPECT_EQ(v3->b[static_cast<size_t>(20 * c.rank + 1)], raw_f32(**file, lora_key(3, M::kV, false), 20, 1));
    EXPECT_NE(v3->a[0], 0.0f);
    for (int64_t layer = 0; layer < 5; ++layer) {
      for (M m : c.modules) {
        const LoraWeights* w = a.weights(layer, m);
        const TensorView* ta = (*file)->find(lora_key(layer, m, true));
        const TensorView* tb = (*file)->find(lora_key(layer, m, false));
        ASSERT_TRUE(ta && tb);
        ASSERT_EQ(ta->nbytes, w->a.size() * 4);
        ASSERT_EQ(tb->nbytes, w->b.size() * 4);
        EXPECT_EQ(std::memcmp(ta->data, w->a.data(), ta->nbytes), 0) << ta->name;
        EXPECT_EQ(std::memcmp(tb->data, w->b.data(), tb->nbytes), 0) << tb->name;
      }
    }
  }
  // Adapter b (r16) does not fit rank-8 slots.
  auto b8 = LoraAdapter::load(models + "/stories260K-lora/b", *base, 8);
  ASSERT_FALSE(b8.is_ok());
  EXPECT_EQ(b8.status().code(), StatusCode::kInvalidArgument);
  EXPECT_MSG_HAS(b8.status(), "rank 16");
  EXPECT_MSG_HAS(b8.status(), "max_rank 8");
}

TEST(LoraAdapterRealTest, EvalAdaptersLoadAgainstTheirBases) {
  LG_REQUIRE_SHARED("eval/adapters/online/mia/adapter_config.json");
  const std::string shared = testing::shared_dir();
  const std::pair<const char*, std::string> bases[] = {
      {"online", shared + "/models/stories260K"},
      {"candidate-good", shared + "/eval/bases/candidate-good"},
      {"candidate-bad", shared + "/eval/bases/candidate-bad"},
  };
  for (const auto& [name, base_dir] : bases) {
    auto base = ModelConfig::load(base_dir);
    ASSERT_TRUE(base.is_ok()) << base.status().to_string();
    for (const char* scenario : {"mia", "cat", "sunny"}) {
      SCOPED_TRACE(std::string(name) + "/" + scenario);
      auto r = LoraAdapter::load(shared + "/eval/adapters/" + name + "/" + scenario, *base, 64);
      ASSERT_TRUE(r.is_ok()) << r.status().to_string();
      EXPECT_EQ((*r)->name(), scenario);
      EXPECT_EQ((*r)->num_targets(), 35);
      EXPECT_EQ((*r)->max_rank(), 8);
      EXPECT_FLOAT_EQ((*r)->weights(4, LoraModule::kDown)->scaling, 2.0f);
      // B starts at zero in PEFT; trained adapters have moved it.
      const std::vector<float>& b = (*r)->weights(2, LoraModule::kUp)->b;
      EXPECT_TRUE(std::any_of(b.begin(), b.end(), [](float x) { return x != 0.0f; }));
    }
  }
}

// A real adapter copied and then broken: the config stops targeting k_proj,
// and a copy loaded against a base with a different hidden size.
TEST(LoraAdapterRealTest, CorruptedCopiesOfAdapterA) {
  LG_REQUIRE_SHARED("models/stories260K-lora/a/adapter_config.json");
  const std::string models = testing::shared_dir() + "/models";
  auto base = ModelConfig::load(models + "/stories260K");
  ASSERT_TRUE(base.is_ok()) << base.status().to_string();
  const std::string root = testing::make_temp_dir("lg-adapter-real");
  ASSERT_FALSE(root.empty());
  const std::string dir = root + "/a";
  fs::copy(models + "/stories260K-lora/a", dir);

  json config = json::parse(std::ifstream(dir + "/adapter_config.json"));
  config["target_modules"] = {"q_proj", "v_proj", "o_proj"};
  testing::write_text(dir + "/adapter_config.json", config.dump());
  auto r = LoraAdapter::load(dir, *base, 16);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  EXPECT_MSG_HAS(r.status(), "self_attn.k_proj.lora_");
  EXPECT_MSG_HAS(r.status(), "does not target");

  fs::copy_file(models + "/stories260K-lora/a/adapter_config.json", dir + "/adapter_config.json",
                fs::copy_options::overwrite_existing);
  ModelConfig wider = *base;
  wider.num_key_value_heads = 8;  // k/v out 64 instead of 32
  r = LoraAdapter::load(dir, wider, 16);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_MSG_HAS(r.status(), "k_proj.lora_B.weight");
  EXPECT_MSG_HAS(r.status(), "[64, 8]");

  fs::remove(dir + "/adapter_model.safetensors");
  testing::write_text(dir + "/adapter_model.bin", "pickle");
  r = LoraAdapter::load(dir, *base, 16);
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  fs::remove_all(root);
}

}  // namespace
}  // namespace loragate
