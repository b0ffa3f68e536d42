// Sampler: picks the next token from a row of logits, for one sequence.
//
// Each sequence owns its Sampler and with it its random stream, seeded once:
// the tokens drawn depend only on the seed and on that sequence's logits,
// never on the other sequences of the batch.
#pragma once

#include <cstdint>
#include <vector>

#include "common/random.h"
#include "engine/sampling_params.h"

namespace loragate {

// log_softmax(logits)[token], the token's rank, and the `top_n` most likely tokens with theirs.
TokenLogprobs compute_logprobs(const float* logits, int64_t vocab, int32_t token, int32_t top_n);

class Sampler {
 public:
  Sampler(const SamplingParams& params, uint64_t seed);

  // Returns the chosen token id. `logits` has `vocab` entries.
  int32_t sample(const float* logits, int64_t vocab);

  // The next uniform double in [0, 1) of this sampler's stream.
  double next_uniform() { return rng_.uniform(); }

 private:
  float temperature_;
  int32_t top_k_;
  float top_p_;
  Xoshiro256 rng_;
  std::vector<int32_t> order_;  // reused candidate buffer
  std::vector<float> probs_;
};

}  // namespace loragate
