// Sequence: one request's state inside the engine — its tokens, KV blocks,
// sampler, prompt scores, detokenised text and timings. Owned by the Engine;
// the Scheduler moves pointers to it between its queues. Touched only by the
// step loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_types.h"
#include "engine/block_manager.h"
#include "engine/logits_processor.h"
#include "engine/prefix_hash.h"
#include "engine/request_sink.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"
#include "tokenizer/tokenizer.h"

namespace loragate {

using Clock = std::chrono::steady_clock;

// Positions [begin, begin + count) of a sequence.
struct PositionRange {
  int64_t begin = 0;
  int64_t count = 0;
};

class Sequence {
 public:
  // With `prompt_logprobs` >= 0 the prompt tokens from `score_from` on are
  // scored, each with that many alternatives; with max_tokens 0 too, the
  // sequence is a pure score and ends once the last one is scored.
  Sequence(int64_t id, std::vector<int32_t> prompt_ids, SamplingParams params, int32_t prompt_logprobs,
           int64_t score_from, uint64_t seed, const Tokenizer* tokenizer, Clock::time_point arrival);

  int64_t id() const { return id_; }
  const std::vector<int32_t>& prompt_ids() const { return prompt_ids_; }
  const std::vector<int32_t>& output_ids() const { return output_ids_; }
  const SamplingParams& params() const { return params_; }
  int64_t total_len() const { return static_cast<int64_t>(prompt_ids_.size() + output_ids_.size()); }
  int32_t token_at(int64_t i) const;

  // Tokens whose K/V are in the cache. After a preemption this drops to 0 and
  // the prompt and the output so far are recomputed.
  int64_t num_computed() const { return num_computed_; }
  int64_t num_uncomputed() const { return total_len() - num_computed_; }
  void advance_computed(int64_t n) { num_computed_ += n; }
  void reset_computed() { num_computed_ = 0; }
  // True while (re)computing known tokens, false when the next step decodes.
  bool in_prefill() const { return num_uncomputed() > 1; }

  // Teacher forcing: prompt token i (score_from <= i < prompt size) is scored
  // with the logits at position i - 1, each exactly once: a recomputation
  // after preemption passes over the positions already scored. All are scored
  // before the first output token is sampled (at position prompt size - 1).
  bool scores_prompt() const { return prompt_logprobs_top_ >= 0; }
  // How many of the next `n` positions to compute score a prompt token.
  int64_t scored_positions(int64_t n) const;
  // The longest next chunk with at most `rows` scored positions.
  int64_t max_chunk_for_scored_rows(int64_t rows) const;
  // The positions among the next `n` to compute whose logits are wanted: the
  // unscored prompt positions, then the last one when it samples a token.
  PositionRange logits_positions(int64_t n) const;
  // Scores the next unscored prompt token with the logits of the position before it.
  void score_next_prompt_token(const float* logits, int64_t vocab);
  // Entry k is prompt token score_from + k.
  const std::vector<TokenLogprobs>& prompt_logprobs() const { return prompt_logprobs_; }

  BlockTable& blocks() { return blocks_; }

  // --- prefix cache ---
  // Tokens that may come from the cache: every known one but the last (its
  // logits are computed to sample), and none from the first position whose
  // logits score a prompt token on.
  int64_t max_cached_tokens() const;
  // The chain of its blocks' hashes starts at `root` (a new root drops the hashes of an old one).
  void set_chain_root(const BlockHash& root);
  // The hashes of its first `num_blocks` blocks (each full of known tokens), computed as needed.
  const std::vector<BlockHash>& chain(int64_t num_blocks, int32_t block_size);
  // Its first `n` tokens' K/V came with shared blocks: computing goes on from there.
  void start_from_cache(int64_t n) { num_computed_ = n; }
  std::string cache_salt;
  int64_t cached_tokens = -1;     // tokens found cached when first admitted; -1 until then
  int64_t registered_blocks = 0;  // leading blocks already offered to the cache
  Sampler& sampler() { return sampler_; }
  // The logits the sampler draws from: `logits` itself, or a processed copy
  // when the request asks for a grammar, penalties, logit_bias or min_tokens;
  // nullptr when its grammar allows no token of the vocabulary.
  const float* logits_to_sample(const float* logits, int64_t vocab, const std::vector<int32_t>& eos_ids);
  // A grammar-constrained sequence's vocabulary, as bytes, and the automaton
  // of its grammar it shares with other requests (set before its first step).
  void constrain(std::shared_ptr<const grammar::TokenVocabulary> vocab, std::shared_ptr<grammar::Automaton> automaton);

  // Appends a sampled token, updates the text and stop conditions, and
  // returns the text that may now be streamed: text that could still turn
  // out to start a stop string is held back until it is decided.
  // `eos_ids` end the sequence unless params().ignore_eos.
  std::string append_token(int32_t token, const std::vector<int32_t>& eos_ids, Clock::time_point now);
  void finish(FinishReason reason) { finish_reason_ = reason; }
  // Ends the sequence because something it needs failed (e.g. its adapter did not load).
  void fail(Status error) {
    finish_reason_ = FinishReason::kError;
    error_ = std::move(error);
  }
  const Status& error() const { return error_; }
  bool finished() const { return finish_reason_ != FinishReason::kNone; }
  FinishReason finish_reason() const { return finish_reason_; }
  const std::string& text() const { return text_; }

  Clock::time_point arrival() const { return arrival_; }
  std::optional<Clock::time_point> first_scheduled;
  const std::vector<Clock::time_point>& token_times() const { return token_times_; }
  int32_t preemptions = 0;
  RequestPriority priority = RequestPriority::kLive;  // the scheduling class (engine_types.h)
  std::string adapter;          // registered adapter name; "" = the base alone
  int32_t lora_slot = -1;       // slot pinned while running; -1 = none
  int32_t slot_waits = 0;       // steps spent waiting for a free adapter slot
  std::vector<TokenLogprobs> logprobs;  // per output token, when params().logprobs >= 0
  RequestSink* sink = nullptr;  // not owned; may be null

 private:
  // The position whose logits score the next unscored prompt token; prompt
  // size - 1 once every one is scored (or when the prompt is not scored).
  int64_t next_scored_position() const;

  int64_t id_;
  std::vector<int32_t> prompt_ids_;
  std::vector<int32_t> output_ids_;
  SamplingParams params_;
  int32_t prompt_logprobs_top_;  // alternatives per scored prompt token; -1 = no scoring
  int64_t score_from_;
  std::vector<TokenLogprobs> prompt_logprobs_;
  Sampler sampler_;
  std::optional<LogitsProcessor> processor_;  // only when params_.processes_logits()
  std::optional<IncrementalDecoder> decoder_;  // absent when the engine has no tokenizer
  std::string text_;
  size_t streamed_ = 0;  // bytes of text_ already returned by append_token
  BlockTable blocks_;
  BlockHash chain_root_;
  std::vector<BlockHash> chain_;  // chain_[i]: the hash of block i under chain_root_
  int64_t num_computed_ = 0;
  FinishReason finish_reason_ = FinishReason::kNone;
  Status error_;
  Clock::time_point arrival_;
  std::vector<Clock::time_point> token_times_;
};

}  // namespace loragate
