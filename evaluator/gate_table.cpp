// The per-item values of the metric table (gate_table.h).
#include "evaluator/gate_table.h"

namespace loragate::eval::gates_detail {

bool item_right(const ItemResult& it) { return it.keyword >= 0 ? it.keyword == 1 : it.exact_match == 1; }

ItemValue keyword_value(const ItemResult& it, bool) {
  return {it.keyword == 1 ? 1.0 : 0.0, 1.0, it.keyword >= 0};  // items without a keyword rule do not count
}

ItemValue exact_match_value(const ItemResult& it, bool) { return {it.exact_match == 1 ? 1.0 : 0.0, 1.0, true}; }

ItemValue rouge_value(const ItemResult& it, bool) { return {it.rougeL_f1, 1.0, true}; }

ItemValue token_f1_value(const ItemResult& it, bool) { return {it.token_f1, 1.0, true}; }

// Token-weighted, or byte-weighted across tokenizers; an item with no
// reference token scored does not count.
ItemValue nll_value(const ItemResult& it, bool per_byte) {
  return {it.nll_sum, static_cast<double>(per_byte ? it.reference_bytes : it.n_ref_tokens), it.n_ref_tokens > 0};
}

ItemValue right_value(const ItemResult& it, bool) { return {item_right(it) ? 1.0 : 0.0, 1.0, true}; }

// 0 is "not measured" (e.g. no time per output token after a single token).
ItemValue ttft_value(const ItemResult& it, bool) { return {it.ttft_ms, 1.0, it.ttft_ms > 0}; }

ItemValue tpot_value(const ItemResult& it, bool) { return {it.tpot_ms, 1.0, it.tpot_ms > 0}; }

}  // namespace loragate::eval::gates_detail
