// retrain_adapter's folder and checks: the same base, data and config land in
// the same folder and anything that changes the result in another; a
// training set edited since it was recorded is refused naming the scenario,
// before anything is trained; a finished folder is recognised.
#include "upgrade/retrain.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <chrono>

#include <filesystem>
#include <fstream>

#include "common/sha256.h"
#include "tests/test_util.h"

namespace loragate::eval {
namespace {

using nlohmann::json;

TEST(RetrainTest, TheFolderIsNamedByEverythingThatChangesTheAdapter) {
  const RetrainBase base{"/models/v2", WeightType::kF32, sha256_hex("v2 weights")};
  const json config = {{"steps", 5}};
  const std::string dir = retrained_adapter_dir("/trained/v2", base, "mia", sha256_hex("data"), config);
  EXPECT_EQ(dir.rfind("/trained/v2/mia-", 0), 0u) << dir;
  EXPECT_EQ(dir.size(), std::string("/trained/v2/mia-").size() + 12);
  EXPECT_EQ(retrained_adapter_dir("/trained/v2", base, "mia", sha256_hex("data"), config), dir);
  EXPECT_EQ(retrained_adapter_dir("/trained/v2", base, "mia", sha256_hex("data"), config, ""), dir)
      << "a fresh start keeps the names folders had before warm starts";
  RetrainBase other_weights = base;
  other_weights.sha256 = sha256_hex("v3 weights");
  RetrainBase other_dtype = base;
  other_dtype.dtype = WeightType::kBF16;
  for (const std::string& changed :
       {retrained_adapter_dir("/trained/v2", other_weights, "mia", sha256_hex("data"), config),
        retrained_adapter_dir("/trained/v2", other_dtype, "mia", sha256_hex("data"), config),
        retrained_adapter_dir("/trained/v2", base, "mia", sha256_hex("other data"), config),
        retrained_adapter_dir("/trained/v2", base, "mia", sha256_hex("data"), json{{"steps", 6}}),
        // A warm start from another adapter is another retraining.
        retrained_adapter_dir("/trained/v2", base, "mia", sha256_hex("data"), config, sha256_hex("online mia"))}) {
    EXPECT_NE(changed, dir);
  }
}

TEST(RetrainTest, AnEditedTrainingSetIsRefusedBeforeAnythingIsTrained) {
  const std::string dir = testing::make_temp_dir("lg-retrain");
  std::ofstream(dir + "/mia.jsonl") << R"({"prompt": "a", "completion": " b"})" << "\n";
  RetrainSpec spec{"mia", dir + "/mia.jsonl", sha256_hex("what it was"), json::object(), ""};
  Result<RetrainOutcome> r = retrain_adapter({dir + "/no-model", WeightType::kF32, ""}, spec, dir + "/trained", {});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().to_string();
  EXPECT_NE(r.status().message().find("scenario 'mia'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("changed since it was recorded"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir + "/trained"));

  spec.config = {{"stpes", 5}};
  r = retrain_adapter({dir + "/no-model", WeightType::kF32, ""}, spec, dir + "/trained", {});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().to_string();
  EXPECT_NE(r.status().message().find("stpes"), std::string::npos) << r.status().message();
  std::filesystem::remove_all(dir);
}

// A training set swapped for a FIFO or a link to /dev/zero after it was
// recorded is refused at once: nothing waits for a writer or reads without end.
TEST(RetrainTest, AFifoOrADeviceInPlaceOfTheTrainingSetIsRefusedAtOnce) {
  const std::string dir = testing::make_temp_dir("lg-retrain-fifo");
  ASSERT_EQ(::mkfifo((dir + "/fifo.jsonl").c_str(), 0600), 0);
  std::filesystem::create_symlink("/dev/zero", dir + "/zero.jsonl");
  for (const char* name : {"fifo.jsonl", "zero.jsonl"}) {
    RetrainSpec spec{"mia", dir + "/" + name, "", json::object(), ""};
    const auto t0 = std::chrono::steady_clock::now();
    Result<RetrainOutcome> r = retrain_adapter({dir + "/no-model", WeightType::kF32, ""}, spec, dir + "/trained", {});
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << name;
    ASSERT_FALSE(r.is_ok()) << name;
    EXPECT_NE(r.status().message().find("not a regular file"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("scenario 'mia'"), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/trained"));
  std::filesystem::remove_all(dir);
}

TEST(RetrainTest, AFolderIsFinishedOnlyWithItsFilesAndNoCheckpoint) {
  const std::string dir = testing::make_temp_dir("lg-retrain-done");
  EXPECT_FALSE(retrained_adapter_finished(dir));
  for (const char* f : {"adapter_config.json", "adapter_model.safetensors"}) std::ofstream(dir + "/" + f) << "x";
  EXPECT_FALSE(retrained_adapter_finished(dir)) << "training.json is written last of the three";
  std::ofstream(dir + "/training.json") << "{}";
  EXPECT_TRUE(retrained_adapter_finished(dir));
  std::filesystem::create_directories(dir + "/checkpoint");
  EXPECT_FALSE(retrained_adapter_finished(dir)) << "a checkpoint left means the run did not end";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace loragate::eval
