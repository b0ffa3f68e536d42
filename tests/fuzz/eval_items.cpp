// The evaluator's eval JSONL items: parse_eval_items() (one JSON object a
// line, ids, prompt or OpenAI messages, token ids, references, keyword rules
// with PCRE2 patterns, the line and item caps).
//
// Input: the eval.jsonl text.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>

#include "evaluator/eval_items.h"

using namespace loragate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto items = eval::parse_eval_items(text, "fuzz/eval.jsonl");
  if (!items.is_ok()) return 0;
  if (items->empty() || items->size() > eval::kMaxItemsPerFile) __builtin_trap();
  std::set<std::string_view> ids;
  for (const eval::EvalItem& item : *items) {
    if (item.id.empty() || !ids.insert(item.id).second) __builtin_trap();
    if (!item.prompt.empty() && !item.messages.is_null()) __builtin_trap();  // a prompt or messages, not both
    for (int32_t id : item.prompt_ids) if (id < 0) __builtin_trap();
    for (int32_t id : item.reference_ids) if (id < 0) __builtin_trap();
  }
  return 0;
}
