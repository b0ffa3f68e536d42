// The evaluator's generic (base-quality) JSONL rows: parse_generic_items()
// ({"id", "ids"} or {"id", "text"}, the line and row caps).
//
// Input: the generic JSONL text.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>

#include "evaluator/eval_items.h"

using namespace loragate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto rows = eval::parse_generic_items(text, "fuzz/generic.jsonl");
  if (!rows.is_ok()) return 0;
  if (rows->empty() || rows->size() > eval::kMaxItemsPerFile) __builtin_trap();
  std::set<std::string_view> ids;
  for (const eval::GenericItem& row : *rows) {
    if (row.id.empty() || !ids.insert(row.id).second) __builtin_trap();
    if (row.ids.empty() == row.text.empty()) __builtin_trap();  // exactly one of ids and text
    for (int32_t id : row.ids) if (id < 0) __builtin_trap();
  }
  return 0;
}
