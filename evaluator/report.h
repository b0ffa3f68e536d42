// Reports of an evaluation run: JSON for machines (stored with the run in the
// history so its verdict can be recomputed later, and read back with
// run_from_json) and one self-contained HTML page for people.
//
// The JSON (format "loragate.eval.run.v1"):
//   format, id, started_at, online_base, online_sha256, candidate_base,
//   candidate_sha256, suite_path, suite_sha256, suite_text, gates_sha256,
//   gates_text, seed, verdict ("pass" / "fail" / "inconclusive"),
//   recorded_run_id, recorded_arm (the recorded reference judged against; 0 = none),
//   online_tokenizer_sha256, candidate_tokenizer_sha256, latency_biased,
//   gates: [{scenario, metric, against, rule, verdict ("pass" / "fail" /
//     "inconclusive" / "skipped"), estimate, low, high, margin, why, method,
//     unit, n, optional}],
//   scenario_order: [names in suite order],
//   scenarios.<name>.<arm>: {base, base_sha256, adapter, adapter_sha256,
//     metrics: {the ArmMetrics fields, named as in expected_metrics.json},
//     items: [{the ItemResult fields}]},
//   generic.<arm>: {nll_mean, perplexity, rows: [{nll_sum, n_tokens, n_bytes}]}.
// JSON has no NaN or infinity: a NaN double is written as null and ±infinity
// as the strings "inf" / "-inf"; run_from_json reads them back. Strings are
// copied as they are: dump the JSON with error_handler_t::replace when the
// texts may hold invalid UTF-8.
//
// The HTML reads top to bottom as a person reads a verdict: a table of
// contents, the verdict and what decided it (every gate that did not pass, the
// passing ones nearest their bounds, report_gates.h), base quality, each
// scenario's charts (latency plots only where a latency gate was judged), the
// flipped items, and last every gate, folded, skipped ones folded by reason.
// It needs nothing from the network (inline CSS and SVG, no scripts, no
// URLs); every text taken from the run is HTML-escaped.
//
// Pure functions of their arguments; safe to call from many threads.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "evaluator/eval_types.h"

namespace loragate::eval {

inline constexpr const char* kRunJsonFormat = "loragate.eval.run.v1";

nlohmann::json report_json(const RunResult& run);

// The inverse of report_json. A key that is absent keeps the field's default
// (runs stored before a field existed stay readable); a key of the wrong type,
// an unknown verdict or another format is kCorrupt, naming the key's path
// (e.g. "scenarios.mia.online.items[3].ttft_ms").
Result<RunResult> run_from_json(const nlohmann::json& json);

// The page: the verdict with both bases; the gate table (skipped gates with
// why, each gate's interval method and unit); base quality
// (generic perplexity, the arms without adapters); then per scenario the
// online and candidate metrics as bars, latency distributions and the items
// that flipped (online right, candidate wrong) side by side.
//
// A bar's whisker is the confidence interval of the gate on that scenario and
// metric, mapped onto the candidate's scale: [low, high] for absolute gates;
// reference + [low, high] for difference rules; reference * (1 + [low, high])
// for relative rules (names ending in "_rel"). The reference is the online
// arm's value for gates against online, else candidate - estimate (or
// candidate / (1 + estimate)).
std::string report_html(const RunResult& run);

}  // namespace loragate::eval
