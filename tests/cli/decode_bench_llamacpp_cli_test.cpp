// `loragate bench decode --compare-llamacpp BIN_DIR` without llama.cpp: a
// stand-in llama-bench (a shell script) proves the wiring and the report, and
// a missing or failing one is skipped with a line saying why, exit 0.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/cli/cli_runner.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

class DecodeBenchLlamaCppCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("lg-decode-llamacpp");
    ASSERT_FALSE(dir_.empty());
    CliRun w = run_cli("synth-model --out " + dir_ + "/m --preset tiny --seed 5");
    ASSERT_EQ(w.exit_code, 0) << w.out;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // BIN_DIR/llama-bench as a shell script with `body`.
  std::string fake_llama_bench(const std::string& body) {
    const std::string bin = dir_ + "/bin";
    std::filesystem::create_directories(bin);
    std::ofstream(bin + "/llama-bench") << "#!/bin/sh\n" << body;
    ::chmod((bin + "/llama-bench").c_str(), 0755);
    return bin;
  }
  CliRun bench(const std::string& dtypes, const std::string& bin_dir) {
    return run_cli("bench decode --model " + dir_ + "/m --dtypes " + dtypes +
                   " --batches 1 --reps 1 --prompt-len 8 --steps 4 --threads 1 --compare-llamacpp " + bin_dir);
  }
  std::string dir_;
};

TEST_F(DecodeBenchLlamaCppCliTest, AMissingFolderIsSkippedWithOneLine) {
  CliRun r = bench("bf16", dir_ + "/no-such-bin");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("llama.cpp comparison skipped: " + dir_ + "/no-such-bin is not a directory"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("bf16          decode b=1"), std::string::npos) << r.out;  // loragate's own figures still
}

TEST_F(DecodeBenchLlamaCppCliTest, PrintsLlamaBenchFiguresBesideLoragatesWithTheRatio) {
  const std::string bin = fake_llama_bench(
      "[ \"$1\" = --help ] && exit 0\n"
      "echo '[{\"n_prompt\": 8, \"n_gen\": 0, \"avg_ts\": 100.0}, {\"n_prompt\": 0, \"n_gen\": 4, \"avg_ts\": 10.0}]'\n");
  // int4 has no GGUF for the tiny preset (intermediate 176 is not whole Q4_0 blocks): skipped alone.
  CliRun r = bench("bf16,int4", bin);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("llama.cpp on the same weights"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("BF16   prefill 8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("BF16   decode b=1               10.0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("int4          no llama.cpp figure: writing its GGUF failed"), std::string::npos) << r.out;
}

TEST_F(DecodeBenchLlamaCppCliTest, AFailingLlamaBenchIsReportedAndTheRunCarriesOn) {
  const std::string bin = fake_llama_bench("[ \"$1\" = --help ] && exit 0\necho 'unknown model architecture' >&2\nexit 3\n");
  CliRun r = bench("bf16", bin);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("bf16          no llama.cpp figure: llama-bench exited with status 3: unknown model architecture"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace loragate
