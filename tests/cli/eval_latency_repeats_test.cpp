// `loragate eval run --latency-repeats N` on a few items of ../shared/eval:
// each item is timed N times per arm while the generated text stays that of
// a single run, and a bad count or a server run is refused with a clear error.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

using nlohmann::json;

class EvalLatencyRepeatsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("eval/bases/candidate-good/model.safetensors");
    dir_ = testing::make_temp_dir("lg-eval-repeats");
    // The first three items of mia: enough to time, quick to run.
    std::ifstream all(eval_dir() + "/scenarios/mia/eval.jsonl");
    std::ofstream few(dir_ + "/mia.jsonl");
    std::string line;
    for (int i = 0; i < 3 && std::getline(all, line); ++i) few << line << "\n";
    std::ofstream(dir_ + "/suite.yaml") << "scenarios:\n  mia: {eval: " << dir_ << "/mia.jsonl}\n";
  }

  static std::string eval_dir() { return testing::shared_dir() + "/eval"; }

  CliRun run(const std::string& json_out, const std::string& extra) {
    return run_cli("eval run --online " + testing::shared_dir() + "/models/stories260K --candidate " + eval_dir() +
                   "/bases/candidate-good --online-adapters " + eval_dir() + "/adapters/online --candidate-adapters " +
                   eval_dir() + "/adapters/candidate-good --suite " + dir_ + "/suite.yaml --db " + dir_ +
                   "/registry.db --json " + json_out + " " + extra);
  }

  static json read(const std::string& path) {
    std::ifstream in(path);
    return json::parse(in);
  }

  std::string dir_;
};

TEST_F(EvalLatencyRepeatsTest, RepeatsTimeEachItemAndKeepTheGeneratedText) {
  const CliRun once = run(dir_ + "/once.json", "");
  ASSERT_NE(once.exit_code, 2) << once.out;
  const CliRun thrice = run(dir_ + "/thrice.json", "--latency-repeats 3");
  ASSERT_NE(thrice.exit_code, 2) << thrice.out;
  ASSERT_EQ(thrice.exit_code, once.exit_code) << thrice.out;
  const json a = read(dir_ + "/once.json"), b = read(dir_ + "/thrice.json");
  for (const char* arm : {"online", "candidate", "online_no_adapter", "candidate_no_adapter"}) {
    const json& items = b["scenarios"]["mia"][arm]["items"];
    ASSERT_EQ(items.size(), 3u) << arm;
    for (size_t i = 0; i < items.size(); ++i) {
      EXPECT_EQ(items[i]["generated_ids"], a["scenarios"]["mia"][arm]["items"][i]["generated_ids"]) << arm << " " << i;
      EXPECT_GT(items[i]["ttft_ms"].get<double>(), 0) << arm << " " << i;
    }
  }
}

TEST_F(EvalLatencyRepeatsTest, ABadCountOrAServerRunIsRefused) {
  const CliRun zero = run(dir_ + "/zero.json", "--latency-repeats 0");
  EXPECT_NE(zero.exit_code, 0) << zero.out;
  EXPECT_NE(zero.out.find("--latency-repeats"), std::string::npos) << zero.out;

  const CliRun server = run_cli("eval run --url http://127.0.0.1:9 --candidate c --suite " + dir_ +
                                "/suite.yaml --latency-repeats 2");
  EXPECT_EQ(server.exit_code, 2) << server.out;
  EXPECT_NE(server.out.find("--latency-repeats is for offline runs"), std::string::npos) << server.out;
}

}  // namespace
}  // namespace loragate
