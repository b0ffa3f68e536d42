#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/cpu/ops.h"

namespace loragate {

Status SamplingParams::validate() const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) {
    return Status::invalid_argument("temperature must be a finite number >= 0, got " + std::to_string(temperature));
  }
  if (top_k < 0) return Status::invalid_argument("top_k must be >= 0, got " + std::to_string(top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return Status::invalid_argument("top_p must be in (0, 1], got " + std::to_string(top_p));
  }
  if (max_tokens < 0) return Status::invalid_argument("max_tokens must be >= 0, got " + std::to_string(max_tokens));
  if (logprobs < -1 || logprobs > 20) {
    return Status::invalid_argument("logprobs must be between 0 and 20, got " + std::to_string(logprobs));
  }
  for (const std::string& s : stop) {
    if (s.empty()) return Status::invalid_argument("stop strings must not be empty");
  }
  return validate_logit_processing();
}

Status SamplingParams::validate_logit_processing() const {
  const auto in = [](float v, float lo, float hi) { return v >= lo && v <= hi; };  // false for NaN
  if (!in(presence_penalty, -2.0f, 2.0f)) {
    return Status::invalid_argument("presence_penalty must be in [-2, 2], got " + std::to_string(presence_penalty));
  }
  if (!in(frequency_penalty, -2.0f, 2.0f)) {
    return Status::invalid_argument("frequency_penalty must be in [-2, 2], got " + std::to_string(frequency_penalty));
  }
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty)) {
    return Status::invalid_argument("repetition_penalty must be a finite number > 0, got " +
                                    std::to_string(repetition_penalty));
  }
  if (logit_bias.size() > kMaxLogitBias) {
    return Status::invalid_argument("logit_bias may name at most " + std::to_string(kMaxLogitBias) + " tokens, got " +
                                    std::to_string(logit_bias.size()));
  }
  for (const auto& [token, bias] : logit_bias) {
    if (!in(bias, -100.0f, 100.0f)) {
      return Status::invalid_argument("logit_bias values must be in [-100, 100], got " + std::to_string(bias) +
                                      " for token " + std::to_string(token));
    }
  }
  if (min_tokens < 0 || min_tokens > max_tokens) {
    return Status::invalid_argument("min_tokens must be in [0, max_tokens = " + std::to_string(max_tokens) +
                                    "], got " + std::to_string(min_tokens));
  }
  return Status::ok();
}

TokenLogprobs compute_logprobs(const float* logits, int64_t vocab, int32_t token, int32_t top_n) {
  const float max_logit = logits[cpu::argmax(logits, vocab)];
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max_logit));
  const double log_z = max_logit + std::log(sum);
  TokenLogprobs out;
  out.token = token;
  out.logprob = static_cast<float>(logits[token] - log_z);
  auto more_likely = [logits](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  for (int32_t id = 0; id < vocab; ++id) out.rank += more_likely(id, token) ? 1 : 0;
  // The top_n most likely in one scan, kept sorted: no vocab-sized buffer
  // for each of the many rows a prompt score asks for.
  const size_t n = static_cast<size_t>(std::clamp<int64_t>(top_n, 0, vocab));
  if (n == 0) return out;
  out.top.reserve(n);
  for (int32_t id = 0; id < vocab; ++id) {
    if (out.top.size() == n && !more_likely(id, out.top.back().first)) continue;
    const auto at = std::upper_bound(out.top.begin(), out.top.end(), id, [&](int32_t a, const auto& b) {
      return more_likely(a, b.first);
    });
    const auto index = at - out.top.begin();
    if (out.top.size() == n) out.top.pop_back();
    out.top.insert(out.top.begin() + index, {id, 0.0f});
  }
  for (auto& [id, logprob] : out.top) logprob = static_cast<float>(logits[id] - log_z);
  return out;
}

Sampler::Sampler(const SamplingParams& params, uint64_t seed)
    : temperature_(params.temperature), top_k_(params.top_k), top_p_(params.top_p), rng_(seed) {}

namespace {

// The canonical rank order: most likely first, ties by id. It depends only on
// the logits, so a sequence draws the same tokens in any batch.
struct MoreLikely {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); }
};

// The first block of ranks the top-p nucleus sorts; each further block doubles.
constexpr size_t kFirstNucleusBlock = 64;

}  // namespace

int32_t Sampler::sample(const float* logits, int64_t vocab) {
  if (temperature_ == 0.0f) return static_cast<int32_t>(cpu::argmax(logits, vocab));
  max_logit_ = logits[cpu::argmax(logits, vocab)];

  // Candidates in rank order as far as top-k or top-p need ranks, else by id.
  order_.resize(static_cast<size_t>(vocab));
  std::iota(order_.begin(), order_.end(), 0);
  size_t keep = order_.size();
  double sum = 0.0;
  if (top_p_ < 1.0f && (top_k_ <= 0 || static_cast<size_t>(top_k_) >= keep)) {
    for (int32_t id = 0; id < vocab; ++id) sum += weight(logits[id]);
    keep = rank_nucleus(logits, sum);
  } else {
    if (top_k_ > 0 && static_cast<size_t>(top_k_) < keep) {
      keep = static_cast<size_t>(top_k_);
      std::partial_sort(order_.begin(), order_.begin() + keep, order_.end(), MoreLikely{logits});
    }
    probs_.resize(keep);
    for (size_t i = 0; i < keep; ++i) sum += probs_[i] = weight(logits[order_[i]]);
    if (top_p_ < 1.0f) {
      nucleus_mass_ = 0.0;
      if (const size_t cut = grow_nucleus(0, keep, sum)) keep = cut;
    }
  }
  if (top_p_ < 1.0f) {  // renormalise over the nucleus
    sum = 0.0;
    for (size_t i = 0; i < keep; ++i) sum += probs_[i];
  }

  const double target = next_uniform() * sum;
  double cumulative = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    cumulative += probs_[i];
    if (target < cumulative) return order_[i];
  }
  return order_[keep - 1];
}

size_t Sampler::rank_nucleus(const float* logits, double total) {
  // Select the next block of most likely tokens (nth_element), sort only that
  // block, and stop once the mass reaches top_p: a peaked distribution ranks
  // a few dozen tokens, not the whole vocabulary.
  const size_t vocab = order_.size();
  probs_.clear();
  nucleus_mass_ = 0.0;
  for (size_t ranked = 0; ranked < vocab;) {
    const size_t next = std::min(vocab, std::max(kFirstNucleusBlock, 2 * ranked));
    if (next < vocab) std::nth_element(order_.begin() + ranked, order_.begin() + next, order_.end(), MoreLikely{logits});
    std::sort(order_.begin() + ranked, order_.begin() + next, MoreLikely{logits});
    for (size_t i = ranked; i < next; ++i) probs_.push_back(weight(logits[order_[i]]));
    if (const size_t cut = grow_nucleus(ranked, next, total)) return cut;
    ranked = next;
  }
  return vocab;  // rounding left the mass just below top_p: every token stays
}

size_t Sampler::grow_nucleus(size_t from, size_t to, double total) {
  for (size_t i = from; i < to; ++i) {
    nucleus_mass_ += probs_[i] / total;
    if (nucleus_mass_ >= top_p_) return i + 1;
  }
  return 0;
}

}  // namespace loragate
