// ModelDir: a model directory opened once — config, weights, tokenizer,
// chat template and the sha256 of the mapped weight files.
#include "model/model_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/sha256.h"
#include "model/checkpoint.h"
#include "model/synth_model.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

namespace fs = std::filesystem;

class ModelDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::make_temp_dir("lg-model-dir");
    ASSERT_FALSE(root_.empty());
    dir_ = root_ + "/tiny";
    ASSERT_TRUE(write_synth_model(dir_, {"tiny", 3, DType::kF32}).is_ok());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string root_, dir_;
};

TEST_F(ModelDirTest, OpensConfigWeightsTokenizerAndTemplateOnce) {
  Result<std::shared_ptr<const ModelDir>> model = ModelDir::open(dir_);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const ModelDir& m = **model;
  EXPECT_EQ(m.path(), dir_);
  EXPECT_EQ(m.config().hidden_size, synth_preset_config("tiny")->hidden_size);
  ASSERT_NE(m.tokenizer(), nullptr);
  EXPECT_LE(m.tokenizer()->vocab_size(), m.config().vocab_size);
  // Every tensor of the checkpoint walk is in the mapped weights.
  Result<CheckpointLayout> layout = checkpoint_layout(m.config(), m.weights());
  ASSERT_TRUE(layout.is_ok()) << layout.status().to_string();
  for (const LinearTensor& t : layout->linears()) EXPECT_NE(m.weights().find(t.name), nullptr) << t.name;
}

TEST_F(ModelDirTest, Sha256IsThatOfTheWeightFileAndStable) {
  auto model = ModelDir::open(dir_);
  ASSERT_TRUE(model.is_ok());
  Result<std::string> file = sha256_file(dir_ + "/model.safetensors");
  ASSERT_TRUE(file.is_ok());
  EXPECT_EQ((*model)->sha256(), *file);  // what `sha256sum model.safetensors` prints
  EXPECT_EQ((*model)->sha256(), *file);  // computed once, the same on every call
  // Another seed is another identity.
  ASSERT_TRUE(write_synth_model(root_ + "/other", {"tiny", 4, DType::kF32}).is_ok());
  EXPECT_NE(ModelDir::open(root_ + "/other").value()->sha256(), (*model)->sha256());
}

TEST_F(ModelDirTest, NoTokenizerJsonMeansNoTokenizer) {
  fs::remove(dir_ + "/tokenizer.json");
  auto model = ModelDir::open(dir_);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  EXPECT_EQ((*model)->tokenizer(), nullptr);
}

TEST_F(ModelDirTest, RefusesATokenizerOfAnotherModelNamingTheFile) {
  // A vocabulary larger than config.json's: ids the embedding table lacks.
  std::ifstream in(dir_ + "/config.json");
  std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = "\"vocab_size\": ";
  const size_t at = config.find(key);
  ASSERT_NE(at, std::string::npos) << config;
  const size_t end = config.find_first_not_of("0123456789", at + key.size());
  config.replace(at + key.size(), end - at - key.size(), "100");
  std::ofstream(dir_ + "/config.json") << config;
  auto model = ModelDir::open(dir_);
  ASSERT_FALSE(model.is_ok());
  EXPECT_NE(model.status().message().find("tokenizer.json"), std::string::npos) << model.status().to_string();
  EXPECT_NE(model.status().message().find("another model"), std::string::npos) << model.status().to_string();
}

TEST_F(ModelDirTest, AMissingDirectoryIsAnErrorNamingIt) {
  auto model = ModelDir::open(root_ + "/absent");
  ASSERT_FALSE(model.is_ok());
  EXPECT_NE(model.status().message().find("absent"), std::string::npos) << model.status().to_string();
}

}  // namespace
}  // namespace loragate
