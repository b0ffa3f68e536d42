// LogitsProcessor: one sequence's logit processing before sampling —
// min_tokens, logit_bias and the repetition/frequency/presence penalties,
// with vLLM's semantics and order (bias, then penalties). It reads only the
// sequence's own row and tokens, so batch invariance holds. Owned by the
// Sequence; touched only by the step loop.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/sampling_params.h"

namespace loragate {

class LogitsProcessor {
 public:
  LogitsProcessor(const SamplingParams& params, const std::vector<int32_t>& prompt_ids);

  // An output token was appended.
  void observe(int32_t token);

  // The processed copy of `logits` (`vocab` entries), valid until the next
  // call. `num_output` tokens are generated so far; `eos_ids` are banned
  // while that is below min_tokens. A row left with no possible token (every
  // one banned) falls back to the model's own logits.
  const float* apply(const float* logits, int64_t vocab, int64_t num_output, const std::vector<int32_t>& eos_ids);

 private:
  SamplingParams params_;  // a copy: the processor outlives no one but may be moved with its Sequence
  std::vector<int32_t> forced_;                        // bias +100: only these may be drawn
  std::unordered_map<int32_t, int32_t> output_counts_;  // for frequency/presence
  std::unordered_set<int32_t> seen_;                   // prompt + output, for repetition
  std::vector<float> row_;
};

}  // namespace loragate
