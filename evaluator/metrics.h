// Quality metrics of the evaluator, exactly as /work/shared/eval/README.md
// (expected_metrics.json → definitions) defines them: the continuation text of
// generated ids, the sentence cut, keyword success, exact match, ROUGE-L F1,
// token F1, and the aggregates of one arm over a scenario's items.
//
// Whitespace everywhere is Python's (str.split / str.strip / re's \s): the
// Unicode White_Space characters plus U+001C..U+001F, so scores match the
// numpy reference that produced expected_metrics.json.
//
// Pure functions of their arguments; safe to call from many threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tokenizer/tokenizer.h"
#include "evaluator/eval_types.h"

namespace loragate::eval {

// continuation_text: the generated ids up to (not including) the first BOS or
// EOS id of `tokenizer` (<s> = 1 and </s> = 2 for Llama / stories260K); each
// token's piece (Tokenizer::id_to_token) with U+2581 replaced by a space, byte
// tokens <0xNN> as the raw byte NN, concatenated, then decoded as UTF-8 with
// every maximal invalid subsequence replaced by U+FFFD (Python's
// errors="replace"). Usually starts with a space: unlike decode(), no leading
// space is stripped. For byte-level vocabularies (GPT-2 style, no <0x00>
// token but a "Ġ" token, e.g. Qwen, Llama 3) each piece is mapped back through
// the GPT-2 byte alphabet instead.
std::string continuation_text(const Tokenizer& tokenizer, const std::vector<int32_t>& ids);

// sentence_end: a match of [.!?]["\u201d]?(?=\s|$): a terminator, an optional
// closing quote (" or U+201D), then whitespace or the end of the text.
// cut_sentences returns `text` cut right after its k-th sentence end
// (matches found left to right, non-overlapping); the whole text when it has
// fewer than k sentence ends or k <= 0.
std::string cut_sentences(const std::string& text, int k);

// keyword_success on the full continuation: 1 success, 0 failure, -1 when the
// rule is kNone.
// * include_exclude: W = the set of maximal [A-Za-z]+ runs (ASCII,
//   case-sensitive); success iff W holds at least one of include_any and none
//   of exclude.
// * prefix: success iff the continuation, stripped of leading and trailing
//   whitespace, starts with prefix.
// * regex: success iff pattern (PCRE2, UTF + UCP, so \w, \d, \s and \b are
//   Unicode-aware as in Python's re) matches somewhere in the continuation
//   (a search, not a full match). A pattern that does not compile (load_suite
//   refuses those) counts as failure.
int keyword_success(const KeywordRule& rule, const std::string& continuation);

// Compiles `pattern` as keyword_success does; the error names the PCRE2
// message and the offset. load_suite calls it so bad patterns fail at load.
Status check_keyword_pattern(const std::string& pattern);

// exact_match: 1 iff ws(compared) == ws(reference), where ws splits on
// whitespace and joins the tokens with one space.
int exact_match(const std::string& compared, const std::string& reference);

// rougeL_f1: C, R = the whitespace tokens (str.split(): punctuation stays
// attached, case-sensitive) of `compared` and `reference`; L = their longest
// common subsequence; P = L/|C|, R_ = L/|R|, F1 = 2*P*R_/(P+R_); 0 when L == 0
// or either side is empty.
double rouge_l_f1(const std::string& compared, const std::string& reference);

// token_f1: SQuAD-style bag-of-tokens F1 on the same whitespace tokens as
// ROUGE-L, but without SQuAD's normalisation (no lower-casing, punctuation or
// article removal: case-sensitive, punctuation attached, like ROUGE-L here).
// common = the multiset intersection of C and R; P = |common|/|C|,
// R_ = |common|/|R|, F1 = 2*P*R_/(P+R_); 0 when nothing is common. As in
// SQuAD, when either side has no tokens the score is 1 if both are empty, else 0.
double token_f1(const std::string& compared, const std::string& reference);

// Fills out->id, continuation_text (from out->generated_ids), compared_text
// (cut after item.reference_sentences sentences), keyword, exact_match,
// rougeL_f1 and token_f1. Leaves generated_ids, nll_sum, n_ref_tokens and the
// latencies, which the runner measures, as they are.
void score_item(const EvalItem& item, const Tokenizer& tokenizer, ItemResult* out);

// percentile: the p-th percentile (p in percent, clamped to [0, 100]) with
// linear interpolation between the closest ranks (numpy's default "linear"):
// sort the n values, r = p/100 * (n-1), result = v[floor(r)] + (v[ceil(r)] -
// v[floor(r)]) * (r - floor(r)). 0 for an empty vector.
double percentile(std::vector<double> values, double p);

// The aggregates of one arm over a scenario's items:
// * n_items = items.size(); exact_match_rate, rougeL_f1, token_f1 = means
//   over all items; keyword_rate = mean over the items with a keyword rule
//   (keyword != -1), 0 when none has one.
// * n_ref_tokens = sum(n_ref_tokens); nll_mean = sum(nll_sum) / n_ref_tokens
//   (token-weighted); perplexity = exp(nll_mean). Both 0 when no reference
//   token was scored.
// * agreement = the share of items whose generated_ids equal those of the
//   online arm's item with the same id (an id online lacks disagrees); 1 when
//   `online` is null, is `&items` itself, or there are no items.
// * negative_flips = the items that online got right and this arm did not,
//   "right" meaning keyword == 1 for items with a keyword rule, else
//   exact_match == 1. 0 when `online` is null or is `&items`.
// * ttft/tpot p50 and p99 = percentile() of the items' ttft_ms / tpot_ms.
ArmMetrics aggregate(const std::vector<ItemResult>& items, const std::vector<ItemResult>* online);

}  // namespace loragate::eval
