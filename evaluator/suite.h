// Eval suites: the YAML file that names a comparison's scenarios and its
// generic base-quality set, and the JSONL files those point at.
//
//   scenarios:
//     mia: {eval: scenarios/mia/eval.jsonl, max_tokens: 48, stop: ["\n\n"]}
//     cat: {eval: scenarios/cat/eval.jsonl}
//   generic: generic/heldout.jsonl        # optional
//
// Relative paths are resolved against the suite file's directory; scenarios
// keep the file's order; unknown keys are refused. Eval JSONL lines are
// EvalItem objects (see eval_types.h; fields the evaluator does not use, such
// as online_main_name, are ignored); generic lines are {"id", "ids"} or
// {"id", "text"}. Every error names the file, the line and the field, e.g.
//   scenarios/cat/eval.jsonl:7: keyword.type: unknown type 'foo' (expected include_exclude, prefix or regex)
//
// Plain functions reading files; safe to call from many threads.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "evaluator/eval_types.h"

namespace loragate::eval {

// Reads the suite at `path` and every file it names. Suite::text is the YAML
// as read, Suite::path is `path` as given.
Result<Suite> load_suite(const std::string& path);

// The suite's content hash: Suite::content_sha256, or sha256 of its YAML
// when that is empty (a Suite built in code). Runs store it; promotion
// compares it with the configured suite's.
std::string suite_sha256(const Suite& suite);

// One eval JSONL file: one item per non-blank line, ids unique, at least one item.
//   id (string, required), prompt (string) or messages (OpenAI list of
//   {role, content}) (exactly one), prompt_ids (ints >= 0), reference (string,
//   required), reference_ids (ints >= 0), reference_sentences (int >= 0),
//   keyword: {type: include_exclude, include_any: [word...], exclude: [word...]}
//          | {type: prefix, prefix: str} | {type: regex, pattern: str} | null.
// Keyword words must be [A-Za-z]+ (the only runs the rule compares), regex
// patterns must compile (PCRE2, UTF); keys a keyword type does not use are refused.
Result<std::vector<EvalItem>> load_eval_items(const std::string& path);

// One generic JSONL file: {"id", "ids": [ints >= 0, non-empty]} or
// {"id", "text": non-empty string}, ids unique, at least one row.
Result<std::vector<GenericItem>> load_generic_items(const std::string& path);

}  // namespace loragate::eval
