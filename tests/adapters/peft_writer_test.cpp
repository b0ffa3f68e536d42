// write_peft_adapter: folders LoraAdapter::load reads back exactly, and
// refusals of what would make a broken folder.
#include "adapters/peft_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "adapters/lora_adapter.h"
#include "adapters/synth_adapter.h"
#include "tests/adapters/adapter_fixtures.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

namespace fs = std::filesystem;

class PeftWriterTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = testing::make_temp_dir("lg-peft-writer"); }
  void TearDown() override { fs::remove_all(root_); }

  std::string root_;
  ModelConfig base_ = testing::tiny_base();
};

TEST_F(PeftWriterTest, WritesWhatTheLoaderReads) {
  // Layer 1's v only: in 8, out 4, rank 2.
  const std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8};
  const std::vector<float> b = {0.5f, -0.5f, 0.25f, -0.25f, 0.125f, -0.125f, 2, -2};
  PeftAdapterSpec spec;
  spec.rank = 2;
  spec.lora_alpha = 6;
  spec.use_rslora = true;
  spec.targets = {LoraModule::kV};
  spec.layers_to_transform = {1};
  spec.base_model_name_or_path = "tiny";
  const std::string dir = root_ + "/new/deeper";  // created
  ASSERT_TRUE(write_peft_adapter(dir, spec,
                                 {{lora_tensor_name(1, LoraModule::kV, true), {2, 8}, a},
                                  {lora_tensor_name(1, LoraModule::kV, false), {4, 2}, b}})
                  .is_ok());
  auto loaded = LoraAdapter::load(dir, base_, 8);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_EQ((*loaded)->num_targets(), 1);
  EXPECT_EQ((*loaded)->weights(0, LoraModule::kV), nullptr);
  const LoraWeights* w = (*loaded)->weights(1, LoraModule::kV);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->a, a);
  EXPECT_EQ(w->b, b);
  EXPECT_FLOAT_EQ(w->scaling, static_cast<float>(6 / std::sqrt(2.0)));
  EXPECT_EQ(peft_adapter_config_json(spec).at("layers_to_transform"), (nlohmann::json{1}));
  spec.layers_to_transform.clear();
  EXPECT_FALSE(peft_adapter_config_json(spec).contains("layers_to_transform"));
}

TEST_F(PeftWriterTest, RefusesValuesThatDoNotFitTheShape) {
  PeftAdapterSpec spec;
  spec.rank = 2;
  spec.targets = {LoraModule::kQ};
  const std::vector<float> seven(7, 1.0f);
  auto s = write_peft_adapter(root_ + "/bad", spec, {{"x.lora_A.weight", {2, 4}, seven}});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("x.lora_A.weight"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(root_ + "/bad/adapter_model.safetensors"));
  spec.rank = 0;
  EXPECT_FALSE(write_peft_adapter(root_ + "/bad", spec, {}).is_ok());
  spec.rank = 2;
  spec.targets.clear();
  EXPECT_FALSE(write_peft_adapter(root_ + "/bad", spec, {}).is_ok());
}

TEST_F(PeftWriterTest, SynthAdaptersAreReproducibleAndLoad) {
  SynthAdapterOptions o;
  o.rank = 4;
  o.seed = 3;
  o.targets = {LoraModule::kQ, LoraModule::kDown};
  ASSERT_TRUE(write_synth_adapter(root_ + "/a", base_, o).is_ok());
  ASSERT_TRUE(write_synth_adapter(root_ + "/b", base_, o).is_ok());
  for (const char* f : {"/adapter_config.json", "/adapter_model.safetensors"}) {
    std::ifstream x(root_ + "/a" + f, std::ios::binary), y(root_ + "/b" + f, std::ios::binary);
    const std::string xs((std::istreambuf_iterator<char>(x)), {}), ys((std::istreambuf_iterator<char>(y)), {});
    EXPECT_FALSE(xs.empty());
    EXPECT_EQ(xs, ys) << f;
  }
  auto loaded = LoraAdapter::load(root_ + "/a", base_, 8);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_EQ((*loaded)->num_targets(), 4);  // 2 layers x 2 modules
}

}  // namespace
}  // namespace loragate
