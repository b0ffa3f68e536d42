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

bool any_possible(const std::vector<float>& row) {
  return std::any_of(row.begin(), row.end(), [](float v) { return v > kBanned; });
}

}  // namespace

LogitsProcessor::LogitsProcessor(const SamplingParams& params, const std::vector<int32_t>& prompt_ids)
    : params_(params) {
  for (const auto& [token, bias] : params_.logit_bias) {
    if (bias >= kForceBias) forced_.push_back(token);
  }
  if (params_.repetition_penalty != 1.0f) seen_.insert(prompt_ids.begin(), prompt_ids.end());
  if (params_.grammar) matcher_.emplace(params_.grammar);
  adjusts_ = params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f ||
             params_.repetition_penalty != 1.0f || !params_.logit_bias.empty() || params_.min_tokens > 0;
}

void LogitsProcessor::constrain(std::shared_ptr<const grammar::TokenVocabulary> vocab,
                                std::shared_ptr<grammar::Automaton> automaton) {
  vocab_ = std::move(vocab);
  if (matcher_ && automaton) matcher_.emplace(std::move(automaton));
}

bool LogitsProcessor::observe(int32_t token, const std::vector<int32_t>& eos_ids) {
  if (params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f) ++output_counts_[token];
  if (params_.repetition_penalty != 1.0f) seen_.insert(token);
  if (!matcher_ || std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end()) return true;
  if (vocab_ == nullptr || token < 0 || token >= vocab_->size()) return false;
  return matcher_->advance(vocab_->bytes(token));
}

bool LogitsProcessor::grammar_complete() const { return matcher_ && matcher_->accepts() && !matcher_->can_continue(); }

bool LogitsProcessor::mask_by_grammar(const float* logits, int64_t vocab, const std::vector<int32_t>& eos_ids) {
  row_.assign(static_cast<size_t>(vocab), kBanned);
  if (vocab_ == nullptr) return false;
  grammar::compute_token_mask(*matcher_, *vocab_, &mask_);
  const int64_t known = std::min<int64_t>(vocab, vocab_->size());
  for (int64_t id = 0; id < known; ++id) {
    if (grammar::mask_test(mask_, static_cast<int32_t>(id))) row_[static_cast<size_t>(id)] = logits[id];
  }
  if (matcher_->accepts()) {
    for (int32_t t : eos_ids) {
      if (t >= 0 && t < vocab) row_[static_cast<size_t>(t)] = logits[t];
    }
  }
  return any_possible(row_);
}

const float* LogitsProcessor::apply(const float* logits, int64_t vocab, int64_t num_output,
                                    const std::vector<int32_t>& eos_ids) {
  if (matcher_) {
    if (!mask_by_grammar(logits, vocab, eos_ids)) return nullptr;
    if (!adjusts_) return row_.data();
    masked_ = row_;  // the fallback should bias and penalties ban every token
  } else {
    row_.assign(logits, logits + vocab);
  }
  const auto in_vocab = [vocab](int32_t t) { return t >= 0 && t < vocab; };
  if (num_output < params_.min_tokens) {
    for (int32_t t : eos_ids) {
      if (in_vocab(t)) row_[static_cast<size_t>(t)] = kBanned;
    }
  }
  for (const auto& [token, bias] : params_.logit_bias) {
    if (!in_vocab(token)) continue;
    float& v = row_[static_cast<size_t>(token)];
    v = bias <= kBanBias ? kBanned : v + bias;
  }
  if (!forced_.empty()) {
    // Keep the forced tokens' (biased) logits, ban every other.
    std::vector<std::pair<int32_t, float>> kept;
    for (int32_t t : forced_) {
      if (in_vocab(t)) kept.emplace_back(t, row_[static_cast<size_t>(t)]);
    }
    std::fill(row_.begin(), row_.end(), kBanned);
    for (const auto& [t, v] : kept) row_[static_cast<size_t>(t)] = v;
  }
  // Penalties in vLLM's order: repetition (prompt and output), then frequency and presence (output).
  const float rep = params_.repetition_penalty;
  if (rep != 1.0f) {
    for (int32_t t : seen_) {
      if (!in_vocab(t)) continue;
      float& v = row_[static_cast<size_t>(t)];
      v = v > 0 ? v / rep : v * rep;
    }
  }
  for (const auto& [t, count] : output_counts_) {
    if (!in_vocab(t)) continue;
    row_[static_cast<size_t>(t)] -= params_.frequency_penalty * static_cast<float>(count) + params_.presence_penalty;
  }
  if (any_possible(row_)) return row_.data();
  if (!matcher_) return logits;
  return masked_.data();
}

}  // namespace loragate
