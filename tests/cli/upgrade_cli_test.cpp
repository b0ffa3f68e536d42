// `loragate upgrade --online` (no server) on ../shared/eval with a short
// recipe: the suite file names each scenario's online adapter and training
// set; every adapter is retrained on the candidate, the comparison runs and
// its verdict decides the exit code; a second run finds the adapters already
// trained; a scenario without a training set is an error naming it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/cli/cli_runner.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

class UpgradeCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("eval/bases/candidate-good/model.safetensors");
    dir_ = testing::make_temp_dir("lg-upgrade-cli");
    std::ofstream(dir_ + "/recipe.json") << R"({"steps": 6})";
    std::ofstream(dir_ + "/gates.yaml")
        << "adapter:\n  keyword_rate: {floor: 0.5, max_drop: null}\n  exact_match_rate:\n  rougeL_f1:\n"
           "  token_f1:\n  nll_mean:\n  negative_flip_rate:\nrecorded:\n";
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  static std::string eval_dir() { return testing::shared_dir() + "/eval"; }

  // The suite with mia (and cat, without a training set, when `untrained`).
  std::string write_suite(bool untrained) {
    const std::string path = dir_ + (untrained ? "/untrained.yaml" : "/suite.yaml");
    std::ofstream out(path);
    out << "scenarios:\n  mia: {eval: " << eval_dir() << "/scenarios/mia/eval.jsonl, adapter: " << eval_dir()
        << "/adapters/online/mia, train: " << eval_dir() << "/scenarios/mia/train.jsonl, train_config: recipe.json}\n";
    if (untrained) {
      out << "  cat: {eval: " << eval_dir() << "/scenarios/cat/eval.jsonl, adapter: " << eval_dir()
          << "/adapters/online/cat}\n";
    }
    out << "generic: " << eval_dir() << "/generic/heldout.jsonl\n";
    return path;
  }
  CliRun upgrade(const std::string& suite) {
    return run_cli("upgrade --online " + testing::shared_dir() + "/models/stories260K --candidate " + eval_dir() +
                   "/bases/candidate-good --candidate-name candidate-good --scenarios " + suite + " --out " + dir_ +
                   "/trained --gates " + dir_ + "/gates.yaml --db " + dir_ + "/registry.db");
  }

  std::string dir_;
};

TEST_F(UpgradeCliTest, RetrainsOnTheCandidateEvaluatesAndReusesWhatItTrained) {
  const std::string suite = write_suite(false);
  CliRun first = upgrade(suite);
  ASSERT_EQ(first.exit_code, 0) << first.out;
  EXPECT_NE(first.out.find("mia          trained -> " + dir_ + "/trained/mia-"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("step 6/6"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("verdict: pass"), std::string::npos) << first.out;
  size_t adapters = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/trained")) {
    adapters += std::filesystem::exists(e.path() / "adapter_model.safetensors") ? 1 : 0;
  }
  EXPECT_EQ(adapters, 1u);

  CliRun second = upgrade(suite);
  EXPECT_EQ(second.exit_code, 0) << second.out;
  EXPECT_NE(second.out.find("already trained (reused)"), std::string::npos) << second.out;
  EXPECT_EQ(second.out.find("step 1/6"), std::string::npos) << "nothing is trained again: " << second.out;
}

TEST_F(UpgradeCliTest, AScenarioWithoutATrainingSetIsAnError) {
  CliRun r = upgrade(write_suite(true));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("scenario 'cat' needs"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/trained")) << "nothing is trained before the file is checked";
}

}  // namespace
}  // namespace loragate
