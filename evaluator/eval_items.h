// The JSONL files a suite names: eval items (one scenario's prompts,
// references and keyword rules) and generic rows (the base-quality set).
//
// Eval lines are EvalItem objects (see eval_types.h; fields the evaluator
// does not use, such as online_main_name, are ignored); generic lines are
// {"id", "ids"} or {"id", "text"}. Every error names the file, the line and
// the field, e.g.
//   scenarios/cat/eval.jsonl:7: keyword.type: unknown type (expected include_exclude, prefix or regex)
// and says what kind of value it found, never the value: the files are named
// by admin clients, and an error must not become a way to read a file.
//
// Plain functions; safe to call from many threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "evaluator/eval_types.h"

namespace loragate::eval {

// Caps on one JSONL file, so that no file can make a load run without end.
inline constexpr int64_t kMaxItemFileBytes = int64_t{64} << 20;  // the shared eval files are under 100 KB
inline constexpr size_t kMaxLineBytes = size_t{1} << 20;         // one item: a prompt, a reference, a rule
inline constexpr size_t kMaxItemsPerFile = 10000;                // the shared sets have 40 (generic: 32)

// One eval JSONL file: one item per non-blank line, ids unique, at least one item.
//   id (string, required), prompt (string) or messages (OpenAI list of
//   {role, content}) (exactly one), prompt_ids (ints >= 0), reference (string,
//   required), reference_ids (ints >= 0), reference_sentences (int >= 0),
//   keyword: {type: include_exclude, include_any: [word...], exclude: [word...]}
//          | {type: prefix, prefix: str} | {type: regex, pattern: str} | null.
// Keyword words must be [A-Za-z]+ (the only runs the rule compares), regex
// patterns must compile (PCRE2, UTF); keys a keyword type does not use are refused.
// `text` is the file's content, `path` names it in errors.
Result<std::vector<EvalItem>> parse_eval_items(std::string_view text, const std::string& path);

// One generic JSONL file: {"id", "ids": [ints >= 0, non-empty]} or
// {"id", "text": non-empty string}, ids unique, at least one row.
Result<std::vector<GenericItem>> parse_generic_items(std::string_view text, const std::string& path);

// The same, read from `path`: a regular file of at most kMaxItemFileBytes
// (read_regular_file in common/path_roots.h); with `roots`, inside one of them.
Result<std::vector<EvalItem>> load_eval_items(const std::string& path, const std::vector<std::string>& roots = {});
Result<std::vector<GenericItem>> load_generic_items(const std::string& path,
                                                    const std::vector<std::string>& roots = {});

}  // namespace loragate::eval
