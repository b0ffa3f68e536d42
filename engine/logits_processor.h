// LogitsProcessor: one sequence's logit processing before sampling — the
// grammar's token mask (structured output), min_tokens, logit_bias and the
// repetition/frequency/presence penalties, in that order (vLLM's: the mask
// first, then bias, then penalties). It reads only the sequence's own row and
// tokens, so batch invariance holds. Owned by the Sequence; touched only by
// the step loop.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/sampling_params.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"

namespace loragate {

class LogitsProcessor {
 public:
  LogitsProcessor(const SamplingParams& params, const std::vector<int32_t>& prompt_ids);

  // Gives a grammar-constrained sequence its tokenizer's vocabulary (as
  // bytes) and the automaton of its grammar to share (its own until then);
  // before the first token.
  void constrain(std::shared_ptr<const grammar::TokenVocabulary> vocab,
                 std::shared_ptr<grammar::Automaton> automaton = nullptr);

  // An output token was appended. False when the grammar cannot take it (a
  // token no mask allowed: only possible if the caller ignored the mask).
  bool observe(int32_t token, const std::vector<int32_t>& eos_ids);

  // The grammar accepts the text so far and nothing more can follow.
  bool grammar_complete() const;

  // The processed copy of `logits` (`vocab` entries), valid until the next
  // call. `num_output` tokens are generated so far; `eos_ids` are banned
  // while that is below min_tokens, and under a grammar until it accepts.
  // When the bias and penalties leave no possible token the row falls back
  // to the model's logits under the grammar mask alone; nullptr when even the
  // grammar allows no token of this vocabulary.
  const float* apply(const float* logits, int64_t vocab, int64_t num_output, const std::vector<int32_t>& eos_ids);

 private:
  // row_ = logits with every token the grammar forbids at -inf; false when none is left.
  bool mask_by_grammar(const float* logits, int64_t vocab, const std::vector<int32_t>& eos_ids);

  SamplingParams params_;  // a copy: the processor may be moved with its Sequence
  bool adjusts_ = false;  // anything besides the grammar: bias, penalties, min_tokens
  std::vector<int32_t> forced_;                        // bias +100: only these may be drawn
  std::unordered_map<int32_t, int32_t> output_counts_;  // for frequency/presence
  std::unordered_set<int32_t> seen_;                   // prompt + output, for repetition
  std::optional<grammar::Matcher> matcher_;
  std::shared_ptr<const grammar::TokenVocabulary> vocab_;
  grammar::TokenMask mask_;
  std::vector<float> row_;
  std::vector<float> masked_;  // the grammar-masked row before bias and penalties; reused across steps
};

}  // namespace loragate
