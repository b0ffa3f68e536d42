// `loragate bench load` on a tiny synthetic model: one row per storage, each
// loaded in its own child, and a clear error for a directory without weights.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/cli/cli_runner.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

TEST(LoadBenchCliTest, PrintsPeakAndSteadyPerStorage) {
  const std::string dir = testing::make_temp_dir("lg-load-bench-cli");
  CliRun w = run_cli("synth-model --out " + dir + "/m --preset tiny --seed 3 --dtype bf16");
  ASSERT_EQ(w.exit_code, 0) << w.out;
  CliRun r = run_cli("bench load --model " + dir + "/m --dtypes f32,bf16");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("BF16 tensors"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("peak/steady"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nf32 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nbf16 "), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

TEST(LoadBenchCliTest, ADirectoryWithoutWeightsFails) {
  const std::string dir = testing::make_temp_dir("lg-load-bench-empty");
  CliRun r = run_cli("bench load --model " + dir);
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("no model.safetensors"), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace loragate
