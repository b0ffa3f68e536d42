// SamplingParams: how one request picks its tokens and when it stops.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace loragate {

struct SamplingParams {
  float temperature = 1.0f;            // 0 = greedy (argmax, ties -> lowest id)
  int32_t top_k = 0;                   // keep the k most likely tokens; 0 = all
  float top_p = 1.0f;                  // keep the smallest set with cumulative probability >= top_p
  std::optional<uint64_t> seed;        // same seed -> same tokens, whatever else is batched
  int32_t max_tokens = 16;             // tokens to generate at most
  std::vector<std::string> stop;       // stop strings; the text ends before the first one found
  bool ignore_eos = false;             // keep going past EOS ids (benchmarks)

  // Says which field is out of range, e.g. "temperature must be >= 0, got -1".
  Status validate() const;
};

}  // namespace loragate
