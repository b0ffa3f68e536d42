#include "engine/logits_processor.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace loragate {
namespace {

constexpr float kBanned = -std::numeric_limits<float>::infinity();
// OpenAI's ends of logit_bias: -100 bans a token, 100 makes it (or the set of them) the only choice.
constexpr float kBanBias = -100.0f;
constexpr float kForceBias = 100.0f;

}  // namespace

LogitsProcessor::LogitsProcessor(const SamplingParams& params, const std::vector<int32_t>& prompt_ids)
    : params_(params) {
  for (const auto& [token, bias] : params_.logit_bias) {
    if (bias >= kForceBias) forced_.push_back(token);
  }
  if (params_.repetition_penalty != 1.0f) seen_.insert(prompt_ids.begin(), prompt_ids.end());
}

void LogitsProcessor::observe(int32_t token) {
  if (params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f) ++output_counts_[token];
  if (params_.repetition_penalty != 1.0f) seen_.insert(token);
}

const float* LogitsProcessor::apply(const float* logits, int64_t vocab, int64_t num_output,
                                    const std::vector<int32_t>& eos_ids) {
  row_.assign(logits, logits + vocab);
  const auto in_vocab = [vocab](int32_t t) { return t >= 0 && t < vocab; };
  if (num_output < params_.min_tokens) {
    for (int32_t t : eos_ids) {
      if (in_vocab(t)) row_[t] = kBanned;
    }
  }
  for (const auto& [token, bias] : params_.logit_bias) {
    if (!in_vocab(token)) continue;
    row_[token] = bias <= kBanBias ? kBanned : row_[token] + bias;
  }
  if (!forced_.empty()) {
    // Keep the forced tokens' (biased) logits, ban every other.
    std::vector<std::pair<int32_t, float>> kept;
    for (int32_t t : forced_) {
      if (in_vocab(t)) kept.emplace_back(t, row_[t]);
    }
    std::fill(row_.begin(), row_.end(), kBanned);
    for (const auto& [t, v] : kept) row_[t] = v;
  }
  // Penalties in vLLM's order: repetition (prompt and output), then frequency and presence (output).
  const float rep = params_.repetition_penalty;
  if (rep != 1.0f) {
    for (int32_t t : seen_) {
      if (!in_vocab(t)) continue;
      float& v = row_[t];
      v = v > 0 ? v / rep : v * rep;
    }
  }
  for (const auto& [t, count] : output_counts_) {
    if (!in_vocab(t)) continue;
    row_[t] -= params_.frequency_penalty * static_cast<float>(count) + params_.presence_penalty;
  }
  const bool any_possible = std::any_of(row_.begin(), row_.end(), [](float v) { return v > kBanned; });
  return any_possible ? row_.data() : logits;
}

}  // namespace loragate
