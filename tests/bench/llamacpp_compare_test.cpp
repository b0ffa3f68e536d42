// `bench decode --compare-llamacpp`'s side that needs no llama.cpp: the
// dtype -> GGUF type mapping, llama-bench's JSON, and the reasons to skip.
#include "bench/llamacpp_compare.h"

#include <gtest/gtest.h>

#include <string>

namespace loragate::bench {
namespace {

TEST(LlamaCppCompare, MapsLikeForLikeStoragesOnly) {
  EXPECT_EQ(llamacpp_type_for("int4").value(), GgmlType::kQ4_0);
  EXPECT_EQ(llamacpp_type_for("int8").value(), GgmlType::kQ8_0);
  EXPECT_EQ(llamacpp_type_for("bf16").value(), GgmlType::kBF16);
  EXPECT_FALSE(llamacpp_type_for("int4-asym").is_ok());
}

// Two tests as llama-bench prints them (fields trimmed to those read, and some others).
constexpr const char* kLlamaBenchJson = R"([
  {"model_type": "llama ?B Q4_0", "n_threads": 2, "n_prompt": 128, "n_gen": 0,
   "avg_ts": 812.5, "stddev_ts": 0.0, "samples_ts": [ 812.5 ]},
  {"model_type": "llama ?B Q4_0", "n_threads": 2, "n_prompt": 0, "n_gen": 32,
   "avg_ts": 95.25, "stddev_ts": 0.0, "samples_ts": [ 95.25 ]}
])";

TEST(LlamaCppCompare, ReadsPromptAndGenerationFiguresFromLlamaBenchJson) {
  Result<LlamaBenchFigures> f = parse_llama_bench_json(kLlamaBenchJson);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_DOUBLE_EQ(f.value().prefill_tps, 812.5);
  EXPECT_DOUBLE_EQ(f.value().decode_tps, 95.25);
}

TEST(LlamaCppCompare, RefusesOutputWithoutBothFigures) {
  EXPECT_FALSE(parse_llama_bench_json("not json").is_ok());
  EXPECT_FALSE(parse_llama_bench_json(R"([{"n_prompt": 128, "n_gen": 0, "avg_ts": 1.0}])").is_ok());
  EXPECT_FALSE(parse_llama_bench_json(R"([{"n_prompt": 128, "n_gen": 0}])").is_ok());
}

TEST(LlamaCppCompare, AMissingFolderOrBinaryIsAReasonToSkip) {
  Result<std::unique_ptr<LlamaCppComparison>> none =
      LlamaCppComparison::prepare("/nonexistent/llama", "/tmp", {"int4"});
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("/nonexistent/llama"), std::string::npos);
  Result<std::unique_ptr<LlamaCppComparison>> empty = LlamaCppComparison::prepare("/", "/tmp", {"int4"});
  ASSERT_FALSE(empty.is_ok());
  EXPECT_NE(empty.status().message().find("llama-bench"), std::string::npos);
}

}  // namespace
}  // namespace loragate::bench
