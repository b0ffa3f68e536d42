// The runner's teacher-forced scoring: an item's prompt and reference as ids
// on one base, the NLL of every reference under one arm, and the generic
// base-quality rows under a base alone. A row that cannot be scored in full
// (the engine refused or cancelled it, or it does not fit max_model_len)
// is recorded with why (ItemResult::unscored, GenericResult::row_unscored)
// and never counts as a score of 0; the rest of the run goes on.
//
// Plain functions over one ArmEngine; not thread-safe beyond what it is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "evaluator/arm_engine.h"
#include "evaluator/eval_types.h"

namespace loragate::eval {

// The ids an item's prompt and reference get on a base (bases may tokenise differently).
struct EncodedItem {
  std::vector<int32_t> prompt, reference;
};

// prompt: prompt_ids, else the rendered messages, else encode(prompt) with
// BOS. reference: reference_ids, else encode(prompt + reference) minus the
// prompt's ids (an error naming `where` when those do not start the whole).
Result<EncodedItem> encode_item(const EvalItem& item, const ArmEngine& engine, const std::string& where);

// UTF-8 bytes of the text `ids` decode to: each token's piece as continuation_text
// renders it (leading space kept, up to the first BOS or EOS).
int64_t decoded_bytes(const Tokenizer& tokenizer, const std::vector<int32_t>& ids);

// Fills nll_sum, n_ref_tokens, reference_bytes and unscored of `items`
// (parallel to `specs` and `encoded`): one batch on `engine` with `adapter`
// ("" = none). A reference longer than max_model_len leaves is scored as far
// as it fits and marked. A status only when the batch did not run (cancelled).
Status score_references(ArmEngine& engine, const std::string& adapter, const std::vector<EvalItem>& specs,
                        const std::vector<EncodedItem>& encoded, std::vector<ItemResult>& items);

// Per-row NLL of the generic rows on `engine` without adapter; nll_mean and
// perplexity are token-weighted over the rows scored in full.
Result<GenericResult> score_generic(const std::string& arm, ArmEngine& engine, const std::vector<GenericItem>& rows);

// "error: <why>" or "cancelled" for a result that did not finish; "" when it did.
std::string unfinished_reason(const GenerationResult& result);

}  // namespace loragate::eval
