// Teacher-forced comparison of two models over the same token sequences:
// how far a candidate's logits are from a reference's, and how often both
// pick the same greedy token. The accuracy figure of a quantised base
// against its f32 original (tests, `loragate bench quant`).
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "engine/llama_model.h"

namespace loragate {

struct LogitAgreement {
  int64_t positions = 0;   // predicting positions compared (a continuation's tokens)
  int64_t top1_same = 0;   // of those, where both models' argmax is the same token
  double max_abs_error = 0;   // largest |candidate - reference| over every logit compared
  double mean_abs_error = 0;  // mean of |candidate - reference| over every logit compared
  double agreement() const { return positions > 0 ? static_cast<double>(top1_same) / positions : 0; }
};

// Runs both models over each sequence in one pass (prompt and continuation
// fed as given, not generated) and compares the logits of the positions that
// predict its continuation: positions prompt_lens[i] - 1 .. size - 2. The
// models must share a vocabulary; a prompt length outside [1, size) is refused.
Result<LogitAgreement> compare_logits(const LlamaModel& reference, const LlamaModel& candidate,
                                      const std::vector<std::vector<int32_t>>& sequences,
                                      const std::vector<int64_t>& prompt_lens);

}  // namespace loragate
