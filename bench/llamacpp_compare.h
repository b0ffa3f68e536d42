// `bench decode --compare-llamacpp BIN_DIR`: llama.cpp's llama-bench on the
// same weights as loragate, in the same run.
//
// prepare() checks that BIN_DIR/llama-bench runs and writes one GGUF per
// dtype that llama.cpp has a like-for-like type for (int4 -> Q4_0, int8 ->
// Q8_0, bf16 -> BF16, f32 -> F32) into a fresh temporary folder, removed with
// the object. run_once() is one `llama-bench -r 1` of a dtype's file, so the
// caller can interleave llama.cpp's repetitions with loragate's own.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/ggml_blocks.h"
#include "common/status.h"

namespace loragate::bench {

// The GGUF type llama.cpp runs for loragate weight storage `dtype`; an error
// for a storage without one (int4-g64, int4-asym, int8-outlier ...).
Result<GgmlType> llamacpp_type_for(const std::string& dtype);

// Tokens/s of one llama-bench run: a prompt of the given length processed at
// once, and that many tokens generated one at a time (from an empty context).
struct LlamaBenchFigures {
  double prefill_tps = 0;
  double decode_tps = 0;
};

// Reads llama-bench's `-o json` output (an array of tests, each with n_prompt,
// n_gen and avg_ts): the pp test is the one with n_gen 0, the tg test the one
// with n_prompt 0. An error names what is missing.
Result<LlamaBenchFigures> parse_llama_bench_json(const std::string& text);

class LlamaCppComparison {
 public:
  // An error says why the comparison cannot run at all (the caller prints it
  // and carries on); a dtype alone that cannot be compared is in skipped().
  static Result<std::unique_ptr<LlamaCppComparison>> prepare(const std::string& bin_dir,
                                                             const std::string& model_dir,
                                                             const std::vector<std::string>& dtypes);
  ~LlamaCppComparison();
  LlamaCppComparison(const LlamaCppComparison&) = delete;
  LlamaCppComparison& operator=(const LlamaCppComparison&) = delete;

  const std::string& binary() const { return binary_; }
  // Whether `dtype` has a GGUF and no run of it has failed yet.
  bool compares(const std::string& dtype) const;
  // One repetition; a failure drops the dtype from later runs and is kept in skipped().
  void run_once(const std::string& dtype, int prompt_len, int steps, int threads);

  const std::vector<LlamaBenchFigures>& samples(const std::string& dtype) const;
  // dtype -> why llama.cpp gives no figure for it.
  const std::map<std::string, std::string>& skipped() const { return skipped_; }

 private:
  LlamaCppComparison() = default;
  Result<LlamaBenchFigures> run_llama_bench(const std::string& gguf, int prompt_len, int steps, int threads) const;

  std::string binary_;
  std::string work_dir_;
  std::map<std::string, std::string> gguf_by_dtype_;
  std::map<std::string, std::vector<LlamaBenchFigures>> samples_;
  std::map<std::string, std::string> skipped_;
};

}  // namespace loragate::bench
