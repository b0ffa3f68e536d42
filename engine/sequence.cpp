#include "engine/sequence.h"

#include <algorithm>

namespace loragate {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "none";
}

Sequence::Sequence(int64_t id, std::vector<int32_t> prompt_ids, SamplingParams params, int32_t prompt_logprobs,
                   int64_t score_from, uint64_t seed, const Tokenizer* tokenizer, Clock::time_point arrival)
    : id_(id),
      prompt_ids_(std::move(prompt_ids)),
      params_(std::move(params)),
      prompt_logprobs_top_(prompt_logprobs),
      score_from_(score_from),
      sampler_(params_, seed),
      arrival_(arrival) {
  if (tokenizer != nullptr) decoder_.emplace(*tokenizer, prompt_ids_, /*skip_special_tokens=*/true);
  if (params_.processes_logits()) processor_.emplace(params_, prompt_ids_);
  if (params_.max_tokens == 0 && !scores_prompt()) finish_reason_ = FinishReason::kLength;
}

int32_t Sequence::token_at(int64_t i) const {
  const int64_t p = static_cast<int64_t>(prompt_ids_.size());
  return i < p ? prompt_ids_[i] : output_ids_[i - p];
}

int64_t Sequence::next_scored_position() const {
  const int64_t last = static_cast<int64_t>(prompt_ids_.size()) - 1;
  return scores_prompt() ? score_from_ - 1 + static_cast<int64_t>(prompt_logprobs_.size()) : last;
}

int64_t Sequence::scored_positions(int64_t n) const {
  const int64_t end = std::min(num_computed_ + n, static_cast<int64_t>(prompt_ids_.size()) - 1);
  return std::max<int64_t>(0, end - std::max(num_computed_, next_scored_position()));
}

int64_t Sequence::max_chunk_for_scored_rows(int64_t rows) const {
  if (next_scored_position() == static_cast<int64_t>(prompt_ids_.size()) - 1) return num_uncomputed();
  return std::max(num_computed_, next_scored_position()) - num_computed_ + rows;
}

PositionRange Sequence::logits_positions(int64_t n) const {
  const int64_t end = num_computed_ + n;
  const bool samples = end == total_len() && params_.max_tokens > 0;
  const int64_t scored = scored_positions(n);
  if (scored == 0) return samples ? PositionRange{end - 1, 1} : PositionRange{end, 0};
  // The scored positions end at prompt size - 1, where the first token is
  // sampled: the two ranges meet when one chunk holds both.
  return {std::max(num_computed_, next_scored_position()), scored + (samples ? 1 : 0)};
}

void Sequence::score_next_prompt_token(const float* logits, int64_t vocab) {
  const int32_t token = prompt_ids_[next_scored_position() + 1];
  prompt_logprobs_.push_back(compute_logprobs(logits, vocab, token, prompt_logprobs_top_));
  const bool all_scored = next_scored_position() == static_cast<int64_t>(prompt_ids_.size()) - 1;
  if (all_scored && params_.max_tokens == 0) finish_reason_ = FinishReason::kLength;
}

int64_t Sequence::max_cached_tokens() const {
  const int64_t last = total_len() - 1;
  return scores_prompt() ? std::min(last, next_scored_position()) : last;
}

void Sequence::set_chain_root(const BlockHash& root) {
  if (root == chain_root_ && !chain_.empty()) return;
  chain_root_ = root;
  chain_.clear();
}

const std::vector<BlockHash>& Sequence::chain(int64_t num_blocks, int32_t block_size) {
  std::vector<int32_t> tokens(static_cast<size_t>(block_size));
  for (int64_t b = static_cast<int64_t>(chain_.size()); b < num_blocks; ++b) {
    for (int32_t i = 0; i < block_size; ++i) tokens[i] = token_at(b * block_size + i);
    chain_.push_back(next_block_hash(b == 0 ? chain_root_ : chain_[b - 1], tokens.data(), block_size));
  }
  return chain_;
}

namespace {

// Length of the longest end of `text` that is a proper prefix of a stop string.
size_t stop_prefix_at_end(const std::string& text, const std::vector<std::string>& stops) {
  size_t longest = 0;
  for (const std::string& s : stops) {
    for (size_t k = std::min(s.size() - 1, text.size()); k > longest; --k) {
      if (text.compare(text.size() - k, k, s, 0, k) == 0) {
        longest = k;
        break;
      }
    }
  }
  return longest;
}

}  // namespace

const float* Sequence::logits_to_sample(const float* logits, int64_t vocab, const std::vector<int32_t>& eos_ids) {
  if (!processor_) return logits;
  return processor_->apply(logits, vocab, static_cast<int64_t>(output_ids_.size()), eos_ids);
}

void Sequence::constrain(std::shared_ptr<const grammar::TokenVocabulary> vocab,
                         std::shared_ptr<grammar::Automaton> automaton) {
  if (processor_) processor_->constrain(std::move(vocab), std::move(automaton));
}

std::string Sequence::append_token(int32_t token, const std::vector<int32_t>& eos_ids, Clock::time_point now) {
  output_ids_.push_back(token);
  token_times_.push_back(now);
  if (processor_ && !processor_->observe(token, eos_ids)) {
    fail(Status::internal("token " + std::to_string(token) + " does not follow the request's grammar"));
    return {};
  }
  // Before min_tokens neither EOS (banned from the logits, but a fallback row may still draw
  // it) nor a stop string ends the sequence.
  const bool below_min = static_cast<int32_t>(output_ids_.size()) <= params_.min_tokens;
  const bool is_eos = std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end();
  bool stop_string_hit = false;
  if (is_eos && !params_.ignore_eos && !below_min) {
    finish_reason_ = FinishReason::kStop;
  } else if (decoder_) {
    const size_t scanned_before = text_.size();
    text_ += decoder_->push(token);
    // A stop string may straddle the old and new text: search from where it could start.
    size_t longest = 0;
    for (const std::string& s : params_.stop) longest = std::max(longest, s.size());
    const size_t from = scanned_before > longest ? scanned_before - longest : 0;
    size_t cut = std::string::npos;
    if (!below_min) {
      for (const std::string& s : params_.stop) cut = std::min(cut, text_.find(s, from));
    }
    if (cut != std::string::npos) {
      text_.resize(cut);
      finish_reason_ = FinishReason::kStop;
      stop_string_hit = true;
    }
  }
  // A grammar that accepts and can take nothing more ends the text, EOS or not.
  if (!finished() && processor_ && processor_->grammar_complete()) finish_reason_ = FinishReason::kStop;
  if (!finished() && static_cast<int32_t>(output_ids_.size()) >= params_.max_tokens) {
    finish_reason_ = FinishReason::kLength;
  }
  if (finished() && decoder_ && !stop_string_hit) text_ += decoder_->flush();
  const size_t safe = finished() ? text_.size() : text_.size() - stop_prefix_at_end(text_, params_.stop);
  if (safe <= streamed_) return {};
  std::string delta = text_.substr(streamed_, safe - streamed_);
  streamed_ = safe;
  return delta;
}

}  // namespace loragate
