// The evaluator's plain values: what a suite holds (scenarios with their eval
// items, the generic base-quality set), what one arm produced per item, the
// aggregates of an arm, gate verdicts and a whole run. Copyable structs with
// no behaviour; safe to use from any thread. Parsing lives in suite.h,
// metrics in metrics.h, gates in gates.h, reports in report.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace loragate::eval {

// How an item's continuation is judged to show the scenario's behaviour.
struct KeywordRule {
  enum class Type { kNone, kIncludeExclude, kPrefix, kRegex };
  Type type = Type::kNone;
  std::vector<std::string> include_any;  // include_exclude: one of these words must appear
  std::vector<std::string> exclude;      // include_exclude: none of these may
  std::string prefix;                    // prefix: the stripped continuation starts with it
  std::string pattern;                   // regex (PCRE2, UTF-8): it matches somewhere in the continuation
};

struct EvalItem {
  std::string id;
  std::string prompt;                    // "" when `messages` is given
  nlohmann::json messages;               // chat items: the OpenAI messages list; null otherwise
  std::vector<int32_t> prompt_ids;       // empty = encode(prompt) with BOS (or render messages)
  std::string reference;
  std::vector<int32_t> reference_ids;    // empty = encode(prompt + reference) minus the prompt_ids prefix
  int32_t reference_sentences = 0;       // compare the first k sentences; 0 = the whole continuation
  KeywordRule keyword;
};

struct GenericItem {
  std::string id;
  std::vector<int32_t> ids;  // or, when empty, `text` encoded with BOS
  std::string text;
};

struct ScenarioSpec {
  std::string name;
  std::string eval_path;     // resolved against the suite file
  int32_t max_tokens = 48;   // greedy tokens generated per item
  std::vector<std::string> stop;
  std::vector<EvalItem> items;
  // For `loragate upgrade --online` (an evaluation ignores them), resolved
  // against the suite file; "" = not given:
  std::string adapter_path;       // the online base's adapter (a PEFT folder)
  std::string train_path;         // the training set its adapter is retrained from on the candidate
  std::string train_config_path;  // the training config (JSON); "" = the trainer's defaults
};

struct Suite {
  std::string path;          // the suite file
  std::string text;          // its YAML as read (stored with every run)
  // sha256 of the suite's content: its YAML and the bytes of every file it
  // names, so an edited eval file is another suite. "" = sha256 of `text`.
  std::string content_sha256;
  std::vector<ScenarioSpec> scenarios;
  std::string generic_path;  // "" = no base-quality set
  std::vector<GenericItem> generic;
};

// What one arm produced for one item, and its scores.
struct ItemResult {
  std::string id;
  std::vector<int32_t> generated_ids;
  std::string continuation_text;  // see metrics.h
  std::string compared_text;      // cut after reference_sentences sentences
  int32_t keyword = -1;           // 1 / 0; -1 = the item has no keyword rule
  int32_t exact_match = 0;
  double rougeL_f1 = 0;
  double token_f1 = 0;
  double nll_sum = 0;             // teacher-forced -log p of the reference tokens
  int64_t n_ref_tokens = 0;
  double ttft_ms = 0;
  double tpot_ms = 0;             // mean time per output token after the first
  // Why the generation did not run to its end ("" = it did): an engine error
  // or a cancellation. Gates on generated text and latency are inconclusive then.
  std::string unfinished;
  // Why the reference was not scored in full ("" = it was): an error, a
  // cancellation, or a reference cut by the context length. NLL gates are
  // inconclusive then, never 0.
  std::string unscored;
  int64_t reference_bytes = 0;    // UTF-8 bytes of the reference text (bits-per-byte across tokenizers)
  int32_t order = 0;              // this arm's place (0 = first) among the item's arms, which alternate per item
};

// The aggregates of one arm on one scenario, with the names of expected_metrics.json.
struct ArmMetrics {
  int64_t n_items = 0;
  double keyword_rate = 0;        // mean of the items that have a keyword rule
  double exact_match_rate = 0;
  double rougeL_f1 = 0;
  double token_f1 = 0;
  double nll_mean = 0;            // token-weighted
  double perplexity = 0;
  int64_t n_ref_tokens = 0;
  double agreement = 1;           // share of items whose generated ids equal the online arm's
  int64_t negative_flips = 0;     // items the online arm got right (keyword or exact match) and this arm not
  double ttft_p50_ms = 0, ttft_p99_ms = 0, tpot_p50_ms = 0, tpot_p99_ms = 0;
};

struct ArmResult {
  std::string arm;                // "online", "candidate", "online_no_adapter", "candidate_no_adapter", "copied_adapter"
  std::string base;               // base name
  std::string base_sha256;
  std::string adapter;            // adapter directory; "" = none
  std::string adapter_sha256;
  std::vector<ItemResult> items;  // in suite order
  ArmMetrics metrics;
};

struct ScenarioResult {
  std::string name;
  std::map<std::string, ArmResult> arms;  // by ArmResult::arm
};

// Base quality: per-row NLL of the generic set, without adapters.
struct GenericResult {
  std::string arm;                // "online" or "candidate"
  std::vector<double> row_nll_sum;
  std::vector<int64_t> row_tokens;
  std::vector<int64_t> row_bytes;  // UTF-8 bytes of each row's scored text (bits-per-byte across tokenizers)
  // Why each row was not scored in full ("" = it was): an error, a
  // cancellation, or a row cut by the context length. Such a row is left out
  // of nll_mean and makes the generic gates inconclusive, never 0.
  std::vector<std::string> row_unscored;
  double nll_mean = 0;
  double perplexity = 0;
};

// kSkipped: a configured gate that could not be judged (no data); it is
// listed with why, and makes the run inconclusive unless marked optional.
enum class Verdict { kPass, kFail, kInconclusive, kSkipped };
const char* verdict_name(Verdict v);  // "pass", "fail", "inconclusive", "skipped"

// One gate on one scenario (or "generic"): an estimate of candidate against a
// reference (online, recorded, or an absolute bound) with its confidence interval.
struct GateResult {
  std::string scenario;           // a scenario name, or "generic"
  std::string metric;             // e.g. "keyword_rate", "nll_mean", "ttft_p99"
  std::string against;            // "absolute", "online", "recorded"
  std::string rule;               // e.g. "max_drop", "max_rise_rel", "floor"
  Verdict verdict = Verdict::kInconclusive;
  double estimate = 0;            // candidate - reference (or the candidate value for absolute gates)
  double low = 0, high = 0;       // confidence interval of the estimate
  double margin = 0;              // the bound the gate allows
  std::string why;                // one line a person reads
  std::string method;             // how the interval was made: "wilson", "newcombe", "paired_bootstrap", ...
  std::string unit;               // what the estimate is in, where it matters: "nats/token", "nats/byte", "ms"
  int64_t n = 0;                  // items (or rows) the gate judged
  bool optional = false;          // the gates file marks it optional: skipped or inconclusive, it does not make the run inconclusive
};

struct RunResult {
  int64_t id = 0;                 // history row; 0 until stored
  int64_t started_at = 0;         // unix seconds
  std::string online_base, online_sha256, candidate_base, candidate_sha256;
  std::string suite_path, suite_text, suite_sha256;
  std::string gates_text, gates_sha256;
  uint64_t seed = 0;
  std::vector<ScenarioResult> scenarios;
  std::vector<GenericResult> generic;  // online, candidate
  std::vector<GateResult> gates;
  Verdict verdict = Verdict::kInconclusive;
  // The recorded reference the run was judged against: a stored run's
  // measurement of today's online base on the same suite content (0 = none).
  int64_t recorded_run_id = 0;
  std::string recorded_arm;       // the arm of that run: "online" or "candidate"
  // The two bases tokenise differently (sha256 of their tokenizer.json
  // differ): NLL gates compare nats per byte, not per token.
  std::string online_tokenizer_sha256, candidate_tokenizer_sha256;
  // The arms' latencies were measured under different scheduling (inside a
  // server, beside live traffic): latency gates are skipped as biased.
  bool latency_biased = false;
};

}  // namespace loragate::eval
