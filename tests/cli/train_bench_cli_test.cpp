// `loragate bench train` on a tiny synthetic model: the figures it prints,
// the examples it dumps for the PyTorch comparison, and clear errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_runner.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

TEST(TrainBenchCliTest, PrintsThroughputAndTheRoofAndDumpsItsExamples) {
  const std::string dir = testing::make_temp_dir("lg-train-bench-cli");
  CliRun w = run_cli("synth-model --out " + dir + "/m --preset tiny --seed 3");
  ASSERT_EQ(w.exit_code, 0) << w.out;
  CliRun r = run_cli("bench train --model " + dir + "/m --batch 3 --seq-len 9 --steps 2 --repeats 1 --threads 1" +
                     " --dump-examples " + dir + "/examples.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* figure : {"MFLOP per token", "peak f32 FMA", "\ntokens/s ", "\nsteps/s ", "\nof compute roof % "}) {
    EXPECT_NE(r.out.find(figure), std::string::npos) << figure << "\n" << r.out;
  }
  // 2 × batch synthetic examples of seq-len tokens, every token after the first a target.
  std::ifstream in(dir + "/examples.jsonl");
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    const nlohmann::json e = nlohmann::json::parse(line);
    ASSERT_EQ(e["ids"].size(), 9u);
    ASSERT_EQ(e["target"].size(), 9u);
    EXPECT_EQ(e["target"][0], 0);
    EXPECT_EQ(e["target"][8], 1);
  }
  EXPECT_EQ(lines, 6);
  std::filesystem::remove_all(dir);
}

TEST(TrainBenchCliTest, NeedsAModelOrTheFixtures) {
  CliRun r = run_cli("bench train --steps 1");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("--model DIR or --fixtures EVAL_DIR"), std::string::npos) << r.out;
}

TEST(TrainBenchCliTest, TheFixturesModeNamesAMissingBase) {
  const std::string dir = testing::make_temp_dir("lg-train-bench-fixtures");
  CliRun r = run_cli("bench train --fixtures " + dir + " --base nowhere");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("bases/nowhere: no such base directory"), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace loragate
