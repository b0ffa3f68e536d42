// SamplingParams: how one request picks its tokens and when it stops.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "grammar/grammar.h"

namespace loragate {

// The most tokens one request's logit_bias may name (OpenAI allows 300).
inline constexpr size_t kMaxLogitBias = 1024;

struct SamplingParams {
  float temperature = 1.0f;            // 0 = greedy (argmax, ties -> lowest id)
  int32_t top_k = 0;                   // keep the k most likely tokens; 0 = all
  float top_p = 1.0f;                  // keep the smallest set with cumulative probability >= top_p
  std::optional<uint64_t> seed;        // same seed -> same tokens, whatever else is batched
  int32_t max_tokens = 16;             // tokens to generate at most
  std::vector<std::string> stop;       // stop strings; the text ends before the first one found
  bool ignore_eos = false;             // keep going past EOS ids (benchmarks)
  int32_t logprobs = -1;               // report each token's log-probability and this many
                                       // most likely alternatives (0..20); -1 = none

  // Logit processing, vLLM's semantics, applied before temperature/top-k/top-p
  // (logprobs stay those of the model's own logits):
  float presence_penalty = 0.0f;       // -2..2, subtracted once from each token already generated
  float frequency_penalty = 0.0f;      // -2..2, subtracted per occurrence in the generated tokens
  float repetition_penalty = 1.0f;     // > 0; tokens of the prompt or output: logit / p if > 0, else * p
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id -> -100..100 added to its logit
  int32_t min_tokens = 0;              // EOS and stop strings are ignored until this many tokens
  // Structured output: the text must be a sentence of this grammar. Each step
  // only tokens whose bytes can follow are drawable (masked before everything
  // else), EOS only once the grammar accepts, and the sequence ends when it
  // accepts and nothing more can follow. Null = unconstrained.
  std::shared_ptr<const grammar::Grammar> grammar;

  // True when any of the above changes the logits the sampler sees.
  bool processes_logits() const {
    return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f ||
           !logit_bias.empty() || min_tokens > 0 || grammar != nullptr;
  }

  // Says which field is out of range, e.g. "temperature must be >= 0, got -1".
  Status validate() const;
  // The part of validate() for the logit-processing fields.
  Status validate_logit_processing() const;
};

// One token's log-probability under the model (before temperature, top-k or
// top-p), generated or scored in the prompt, and the most likely alternatives
// at that position.
struct TokenLogprobs {
  int32_t token = 0;
  float logprob = 0;
  int32_t rank = 1;  // 1 + the number of tokens more likely than it (ties by id): 1 = the most likely
  std::vector<std::pair<int32_t, float>> top;  // most likely first (ties by id)
};

}  // namespace loragate
