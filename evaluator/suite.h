// Eval suites: the YAML file that names a comparison's scenarios and its
// generic base-quality set, and the JSONL files those point at
// (eval_items.h).
//
//   scenarios:
//     mia: {eval: scenarios/mia/eval.jsonl, max_tokens: 48, stop: ["\n\n"]}
//     cat: {eval: scenarios/cat/eval.jsonl}
//   generic: generic/heldout.jsonl        # optional
//
// `loragate upgrade --online` reads the same file with three more keys per
// scenario (an evaluation ignores them): adapter (the online adapter's
// folder), train (the JSONL its adapter is retrained from) and train_config
// (a training config JSON).
//
// Relative paths are resolved against the suite file's directory; scenarios
// keep the file's order; unknown keys are refused. Errors name the file, the
// line and the field, never a value of the file.
//
// A suite is hostile input: a server reads the paths an admin client names.
// So it is read in two phases, the YAML first (read_suite_spec: at most
// kMaxScenarios scenarios, every path resolved to its real path and, in a
// server, confined to evaluation.roots), then the files it names
// (load_suite_items), so that a caller can check the scenarios before any
// item file is read. Every file is read with read_regular_file (a regular
// file, size-capped: never a FIFO, device or /proc file) and the files of
// one suite together are capped at kMaxSuiteBytes.
//
// Plain functions reading files; safe to call from many threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "evaluator/eval_items.h"
#include "evaluator/eval_types.h"

namespace loragate::eval {

inline constexpr int64_t kMaxSuiteFileBytes = int64_t{1} << 20;  // the YAML: names and paths only
inline constexpr int64_t kMaxSuiteBytes = int64_t{256} << 20;    // the suite and every file it names together
inline constexpr size_t kMaxScenarios = 64;                      // a comparison of adapters, not a catalogue

// Phase one, the YAML: reads the suite at `path` and resolves every path it
// names to its real path. With `roots` (a server's evaluation.roots) each
// must lie inside one of them; without (loragate eval run), any file is
// read. No eval or generic file is read: items are empty.
// Suite::text is the YAML as read, Suite::path is `path` as given.
Result<Suite> read_suite_spec(const std::string& path, const std::vector<std::string>& roots = {});

// The YAML of a suite at `path`, from `text`: keys, types, the scenario cap;
// paths are resolved lexically against path's directory. Touches no file.
Result<Suite> parse_suite_spec(std::string text, const std::string& path);

// Phase two: reads every eval and generic file `suite` names (inside `roots`
// when given) into its items, and sets Suite::content_sha256.
Status load_suite_items(Suite* suite, const std::vector<std::string>& roots = {});

// Both phases.
Result<Suite> load_suite(const std::string& path, const std::vector<std::string>& roots = {});

// The suite's content hash: Suite::content_sha256, or sha256 of its YAML
// when that is empty (a Suite built in code). Runs store it; promotion
// compares it with the configured suite's. load_suite_items sets it to the
// sha256 of
//   "loragate-suite\0" <yaml>
//   then per scenario, in order: "\0eval\0" <name> "\0" <byte count> "\0" <bytes>
//   then, with a generic set:    "\0generic\0" <byte count> "\0" <bytes>
// (byte counts in decimal), so an edited eval file is another suite.
std::string suite_sha256(const Suite& suite);

}  // namespace loragate::eval
