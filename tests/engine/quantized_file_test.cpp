// `loragate quantize` files: they load into exactly the packed weights that
// quantising the original at load gives, carry their own identity, and are
// refused, naming the tensor or key, when their levels, scales, groups or
// metadata are wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "engine/llama_weights.h"
#include "model/model_dir.h"
#include "model/safetensors.h"
#include "model/synth_model.h"
#include "engine/quantize_model.h"
#include "tests/engine/same_packing.h"
#include "tests/test_util.h"

namespace loragate::quantized_file_test {

namespace fs = std::filesystem;

Result<std::unique_ptr<LlamaWeights>> load_weights(const std::string& dir, WeightType storage) {
  LG_ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::load(dir));
  LG_ASSIGN_OR_RETURN(std::unique_ptr<WeightStore> store, WeightStore::open_dir(dir));
  return LlamaWeights::load(*store, config, storage);
}

void expect_same_weights(const LlamaWeights& got, const LlamaWeights& want, int64_t vocab, int64_t hidden) {
  ASSERT_EQ(got.layers().size(), want.layers().size());
  for (size_t l = 0; l < got.layers().size(); ++l) {
    const LayerWeights &g = got.layers()[l], &w = want.layers()[l];
    const std::string at = "layer " + std::to_string(l);
    testing::expect_same_packing(g.qkv, w.qkv, at + " qkv");
    testing::expect_same_packing(g.o, w.o, at + " o");
    testing::expect_same_packing(g.gate_up, w.gate_up, at + " gate_up");
    testing::expect_same_packing(g.down, w.down, at + " down");
    EXPECT_EQ(g.input_norm, w.input_norm) << at;
    EXPECT_EQ(g.post_attn_norm, w.post_attn_norm) << at;
  }
  testing::expect_same_packing(got.lm_head(), want.lm_head(), "lm_head");
  EXPECT_EQ(got.final_norm(), want.final_norm());
  std::vector<float> a(static_cast<size_t>(hidden)), b(static_cast<size_t>(hidden));
  for (int32_t t = 0; t < vocab; ++t) {
    got.embed(t, a.data());
    want.embed(t, b.data());
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "embedding row " << t;
  }
}

// Reads every tensor of `dir`/model.safetensors, lets `edit` change them or
// the metadata, and writes the file back.
void rewrite(const std::string& dir,
             const std::function<void(std::vector<TensorData>&, std::map<std::string, std::string>&)>& edit) {
  const std::string path = dir + "/model.safetensors";
  std::vector<TensorData> tensors;
  std::map<std::string, std::string> metadata;
  {
    auto file = SafetensorsFile::open(path);
    ASSERT_TRUE(file.is_ok()) << file.status().to_string();
    metadata = (*file)->metadata();
    for (const TensorView& t : (*file)->tensors()) {
      tensors.push_back({t.name, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)});
    }
  }
  edit(tensors, metadata);
  ASSERT_TRUE(write_safetensors(path, tensors, metadata).is_ok());
}

TensorData& tensor(std::vector<TensorData>& tensors, const std::string& name) {
  for (TensorData& t : tensors) {
    if (t.name == name) return t;
  }
  ADD_FAILURE() << "no tensor " << name;
  return tensors.front();
}

class QuantizedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::make_temp_dir("quantized-file");
    source_ = root_ + "/tiny";
    ASSERT_TRUE(write_synth_model(source_, {"tiny", 7, DType::kF32}).is_ok());
  }
  void TearDown() override { fs::remove_all(root_); }

  // Quantises the tiny model to `type` into root/<name>.
  std::string quantize(WeightType type, const std::string& name) {
    const std::string out = root_ + "/" + name;
    Result<QuantizeResult> r = quantize_model(source_, out, type);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return out;
  }

  // The status of loading `dir` as `storage`, which must fail.
  Status load_error(const std::string& dir, WeightType storage) {
    auto loaded = load_weights(dir, storage);
    EXPECT_FALSE(loaded.is_ok()) << "loaded " << dir;
    return loaded.is_ok() ? Status::ok() : loaded.status();
  }

  std::string root_, source_;
};

// The tiny model's down projection has K = 176: groups of 32 leave a last
// group of 16, groups of 64 one of 48, so short groups are covered.
TEST_F(QuantizedFileTest, LoadsTheSameBytesAsQuantisingTheOriginalAtLoad) {
  for (WeightType t : {WeightType::kInt8, WeightType::kInt4, WeightType::kInt4G64, WeightType::kInt4Asym,
                       WeightType::kInt4AsymG64}) {
    SCOPED_TRACE(std::string(weight_type_name(t)));
    const std::string dir = quantize(t, std::string(weight_type_name(t)));
    auto from_file = load_weights(dir, t);
    ASSERT_TRUE(from_file.is_ok()) << from_file.status().to_string();
    auto at_load = load_weights(source_, t);
    ASSERT_TRUE(at_load.is_ok()) << at_load.status().to_string();
    expect_same_weights(**from_file, **at_load, 512, 64);
  }
}

TEST_F(QuantizedFileTest, AnInt8FileLoadsAsInt8OutlierToo) {
  const std::string dir = quantize(WeightType::kInt8, "int8");
  auto from_file = load_weights(dir, WeightType::kInt8Outlier);
  ASSERT_TRUE(from_file.is_ok()) << from_file.status().to_string();
  auto at_load = load_weights(source_, WeightType::kInt8Outlier);
  ASSERT_TRUE(at_load.is_ok());
  expect_same_weights(**from_file, **at_load, 512, 64);
}

// stories260K ties lm_head to the embeddings: the file holds the lm_head
// quantised from the embedding values, as quantising at load does.
TEST_F(QuantizedFileTest, ATiedLmHeadIsWrittenQuantisedFromTheEmbeddings) {
  LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
  const std::string stories = testing::shared_dir() + "/models/stories260K";
  for (WeightType t : {WeightType::kInt8, WeightType::kInt4Asym}) {
    SCOPED_TRACE(std::string(weight_type_name(t)));
    const std::string dir = root_ + "/stories-" + std::string(weight_type_name(t));
    ASSERT_TRUE(quantize_model(stories, dir, t).is_ok());
    auto from_file = load_weights(dir, t);
    ASSERT_TRUE(from_file.is_ok()) << from_file.status().to_string();
    auto at_load = load_weights(stories, t);
    ASSERT_TRUE(at_load.is_ok());
    auto config = ModelConfig::load(stories);
    ASSERT_TRUE(config.is_ok());
    expect_same_weights(**from_file, **at_load, config->vocab_size, config->hidden_size);
  }
}

TEST_F(QuantizedFileTest, HasItsOwnIdentityAndRecordsItsSource) {
  const std::string dir = root_ + "/int8";
  Result<QuantizeResult> r = quantize_model(source_, dir, WeightType::kInt8);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  auto source_sha = sha256_file(source_ + "/model.safetensors");  // what `sha256sum` says
  ASSERT_TRUE(source_sha.is_ok());
  auto own = ModelDir::open(dir);
  ASSERT_TRUE(own.is_ok()) << own.status().to_string();
  auto own_sha = sha256_file(dir + "/model.safetensors");
  ASSERT_TRUE(own_sha.is_ok());
  EXPECT_EQ((*own)->sha256(), *own_sha);
  EXPECT_EQ(r->sha256, *own_sha);
  EXPECT_NE(*own_sha, *source_sha);
  EXPECT_EQ(r->source_sha256, *source_sha);
  auto file = SafetensorsFile::open(dir + "/model.safetensors");
  ASSERT_TRUE(file.is_ok());
  EXPECT_EQ((*file)->metadata().at("loragate.source_sha256"), *source_sha);
  EXPECT_EQ((*file)->metadata().at("loragate.dtype"), "int8");
  EXPECT_TRUE(fs::exists(dir + "/config.json"));
  EXPECT_TRUE(fs::exists(dir + "/tokenizer.json"));
  EXPECT_LT(r->bytes, r->source_bytes / 3);
}

TEST_F(QuantizedFileTest, RefusesToLoadAsAnotherType) {
  const std::string dir = quantize(WeightType::kInt8, "int8");
  for (WeightType other : {WeightType::kF32, WeightType::kBF16, WeightType::kInt4}) {
    Status s = load_error(dir, other);
    EXPECT_NE(s.message().find("quantised as int8"), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find(std::string(weight_type_name(other))), std::string::npos) << s.to_string();
  }
  const std::string int4 = quantize(WeightType::kInt4, "int4");
  EXPECT_NE(load_error(int4, WeightType::kInt4G64).message().find("quantised as int4"), std::string::npos);
}

TEST_F(QuantizedFileTest, RefusesCorruptedScalesNamingTheTensor) {
  const std::string dir = quantize(WeightType::kInt8, "int8");
  const std::string name = "model.layers.1.self_attn.k_proj.weight_scale";
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), -0.5f, std::numeric_limits<float>::infinity()}) {
    rewrite(dir, [&](std::vector<TensorData>& t, std::map<std::string, std::string>&) {
      std::memcpy(tensor(t, name).bytes.data() + 3 * 4, &bad, 4);
    });
    Status s = load_error(dir, WeightType::kInt8);
    EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.to_string();
    EXPECT_NE(s.message().find("'" + name + "'"), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find("scale of row 3"), std::string::npos) << s.to_string();
  }
}

TEST_F(QuantizedFileTest, RefusesCorruptedInt4ScalesAndMinimums) {
  const std::string dir = quantize(WeightType::kInt4Asym, "int4-asym");
  const std::string scale = "model.layers.0.mlp.down_proj.weight_scale";
  rewrite(dir, [&](std::vector<TensorData>& t, std::map<std::string, std::string>&) {
    const uint16_t negative = 0xbc00;  // -1.0 in f16; row 2, group 5 of 6
    std::memcpy(tensor(t, scale).bytes.data() + (2 * 6 + 5) * 2, &negative, 2);
  });
  Status s = load_error(dir, WeightType::kInt4Asym);
  EXPECT_NE(s.message().find("'" + scale + "'"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("row 2, group 5"), std::string::npos) << s.to_string();

  const std::string fresh = quantize(WeightType::kInt4Asym, "int4-asym-2");
  const std::string minimum = "model.layers.0.mlp.gate_proj.weight_min";
  rewrite(fresh, [&](std::vector<TensorData>& t, std::map<std::string, std::string>&) {
    const uint16_t inf = 0x7c00;
    std::memcpy(tensor(t, minimum).bytes.data(), &inf, 2);
  });
  s = load_error(fresh, WeightType::kInt4Asym);
  EXPECT_NE(s.message().find("'" + minimum + "'"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("minimum of row 0, group 0"), std::string::npos) << s.to_string();
}

TEST_F(QuantizedFileTest, RefusesAnInt8LevelOutsideItsRange) {
  const std::string dir = quantize(WeightType::kInt8, "int8");
  const std::string name = "model.layers.0.mlp.up_proj.weight";
  rewrite(dir, [&](std::vector<TensorData>& t, std::map<std::string, std::string>&) {
    tensor(t, name).bytes[5 * 64 + 9] = 0x80;  // -128, row 5, column 9
  });
  Status s = load_error(dir, WeightType::kInt8);
  EXPECT_NE(s.message().find("'" + name + "'"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("level -128 at row 5, column 9"), std::string::npos) << s.to_string();
}

TEST_F(QuantizedFileTest, RefusesGroupsThatDoNotTileTheRow) {
  const std::string dir = quantize(WeightType::kInt4, "int4");
  // A group size the type does not have.
  rewrite(dir, [&](std::vector<TensorData>&, std::map<std::string, std::string>& m) {
    m["loragate.group_size"] = "48";
  });
  Status s = load_error(dir, WeightType::kInt4);
  EXPECT_NE(s.message().find("loragate.group_size '48'"), std::string::npos) << s.to_string();

  // Scales for groups of 64 in a file of groups of 32: 3 groups per row of 176, not 6.
  const std::string wrong = quantize(WeightType::kInt4, "int4-b");
  const std::string name = "model.layers.0.mlp.down_proj.weight_scale";
  rewrite(wrong, [&](std::vector<TensorData>& t, std::map<std::string, std::string>&) {
    TensorData& scales = tensor(t, name);
    scales.shape[1] = 3;
    scales.bytes.resize(static_cast<size_t>(scales.shape[0] * 3 * 2));
  });
  s = load_error(wrong, WeightType::kInt4);
  EXPECT_NE(s.message().find("'" + name + "'"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("expected [64,6]"), std::string::npos) << s.to_string();
}

TEST_F(QuantizedFileTest, RefusesTensorsOfTheWrongDtypeAndUnknownFormats) {
  const std::string dir = quantize(WeightType::kInt8, "int8");
  const std::string name = "model.layers.0.self_attn.q_proj.weight";
  rewrite(dir, [&](std::vector<TensorData>& t, std::map<std::string, std::string>&) {
    tensor(t, name).dtype = DType::kU8;
  });
  Status s = load_error(dir, WeightType::kInt8);
  EXPECT_NE(s.message().find("'" + name + "'"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("is U8, expected I8"), std::string::npos) << s.to_string();

  // Without its metadata the file reads as float weights, and its integer tensors are refused.
  rewrite(dir, [&](std::vector<TensorData>&, std::map<std::string, std::string>& m) { m.clear(); });
  s = load_error(dir, WeightType::kF32);
  EXPECT_NE(s.message().find("expected a float tensor"), std::string::npos) << s.to_string();

  rewrite(dir, [&](std::vector<TensorData>&, std::map<std::string, std::string>& m) {
    m["loragate.format"] = "loragate-quantized-v9";
  });
  s = load_error(dir, WeightType::kInt8);
  EXPECT_NE(s.message().find("loragate.format 'loragate-quantized-v9'"), std::string::npos) << s.to_string();
}

TEST_F(QuantizedFileTest, QuantizeRefusesBadRequestsAndLeavesNothingHalfWritten) {
  const std::string int8 = quantize(WeightType::kInt8, "int8");
  EXPECT_EQ(quantize_model(source_, int8, WeightType::kInt8).status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(quantize_model(int8, root_ + "/again", WeightType::kInt4).status().message().find("quantised already"),
            std::string::npos);
  EXPECT_FALSE(quantize_model(source_, root_ + "/f", WeightType::kBF16).is_ok());
  EXPECT_NE(quantize_model(source_, root_ + "/o", WeightType::kInt8Outlier).status().message().find("--dtype int8"),
            std::string::npos);

  // A source missing a tensor fails before anything is written.
  rewrite(source_, [&](std::vector<TensorData>& t, std::map<std::string, std::string>&) {
    std::erase_if(t, [](const TensorData& d) { return d.name == "model.layers.1.mlp.down_proj.weight"; });
  });
  Status s = quantize_model(source_, root_ + "/broken", WeightType::kInt8).status();
  EXPECT_NE(s.message().find("model.layers.1.mlp.down_proj.weight"), std::string::npos) << s.to_string();
  EXPECT_FALSE(fs::exists(root_ + "/broken"));
  EXPECT_FALSE(fs::exists(root_ + "/broken.partial"));
}

}  // namespace loragate::quantized_file_test
