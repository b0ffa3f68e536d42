// Sampler: picks the next token from a row of logits, for one sequence.
//
// Each sequence owns its Sampler and with it its random stream, seeded once:
// the tokens drawn depend only on the seed and on that sequence's logits,
// never on the other sequences of the batch.
#pragma once

#include <cmath>
#include <cstddef>
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
  // exp((logit - max) / T): a token's unnormalised probability.
  float weight(float logit) const { return std::exp((logit - max_logit_) / temperature_); }
  // Ranks into order_/probs_ only as many tokens as the top-p nucleus needs
  // (out of the whole vocabulary, whose weights sum to `total`); returns its size.
  size_t rank_nucleus(const float* logits, double total);
  // Adds probs_[from, to) / total to nucleus_mass_; the nucleus size once it
  // reaches top_p, else 0.
  size_t grow_nucleus(size_t from, size_t to, double total);

  float temperature_;
  int32_t top_k_;
  float top_p_;
  Xoshiro256 rng_;
  // Workspace reused across tokens: no vocabulary-sized allocation per token.
  std::vector<int32_t> order_;  // candidate ids, ranked first
  std::vector<float> probs_;    // weight of order_[i]
  float max_logit_ = 0;
  double nucleus_mass_ = 0;
};

}  // namespace loragate
