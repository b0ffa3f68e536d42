// The gates of a base swap: rules that turn a run's per-item results into
// pass / fail / inconclusive / skipped, each with a confidence interval.
//
// Gates, per scenario unless noted:
// * adapter: candidate (candidate base + the adapter retrained for it)
//   against online (online base + its adapter): non-inferiority margins
//   (max_drop for higher-is-better metrics, max_rise / max_rise_rel for
//   lower-is-better ones), absolute floors / ceilings on the candidate, and
//   the negative-flip rate (max_rate);
// * recorded: candidate against the recorded reference (RecordedReference:
//   a stored run's measurement of today's online base on the same suite
//   content), items paired by scenario and item id; skipped when there is
//   none or it measured another suite;
// * no_adapter (base quality): candidate_no_adapter against online_no_adapter;
// * generic (base quality, scenario "generic"): the candidate base's NLL /
//   perplexity on the generic set against online's, rows paired;
// * latency: per-item TTFT / time-per-output-token quantiles, candidate
//   against online, items paired.
// Base quality is on by default because retrained adapters hide a damaged
// base: on the shared fixtures candidate-bad scores keyword 1.000 with its
// adapters, while its generic perplexity is 9.29 against online's 3.35.
//
// Interval methods (GateResult::method), two-sided at bootstrap.level:
// * "wilson": floors / ceilings on a proportion (keyword_rate,
//   exact_match_rate): the Wilson score interval of the candidate's count;
// * "newcombe": max_drop on a proportion: Newcombe's (1998, method 10)
//   interval for the difference of paired proportions; neither collapses
//   at 0 or 1, so 40/40 against 40/40 is [-0.088, +0.088], not [0, 0];
// * "paired_bootstrap": everything continuous (ROUGE-L, token F1, NLL,
//   perplexity, the generic set, latency quantiles): a paired bootstrap over
//   items (bootstrap.h), the same resampled items in both arms;
// * "exact_binomial": the negative-flip rate (below).
// For a difference d = candidate - reference (candidate / reference - 1 for
// max_rise_rel) and margin m:
// * higher is better (max_drop m): pass when low >= -m, fail when high < -m;
// * lower is better (max_rise m, max_rise_rel m): pass when high <= m, fail
//   when low > m;
// * floor f on the candidate's value: pass when low >= f, fail when high < f;
//   ceiling c: pass when high <= c, fail when low > c;
// * latency max_rise_rel r with min_abs_rise_ms a: a rise must exceed both
//   to count, judged on the intervals of the relative and the absolute (ms)
//   rise: pass when either upper end is within its bound (high_rel <= r or
//   high_ms <= a), fail when both lower ends exceed theirs (low_rel > r and
//   low_ms > a); so a 1 -> 4.9 ms rise fails (no floor clamps it away) and
//   a 0.1 -> 0.2 ms one on timer noise does not;
// * otherwise inconclusive: the interval straddles the bound.
//
// Negative flips (adapter.negative_flip_rate: {max_rate: m}): an item flips
// when online got it right and the candidate not ("right": keyword == 1 for an
// item with a keyword rule, else exact_match == 1, as ArmMetrics::negative_flips).
// With b flips among the n paired items (the b cell of McNemar's table; c
// counts the fixes, shown in the why line), the test is the exact one-sided
// binomial test of H0: P(flip) <= m, p = P(Binomial(n, m) >= b): fail when
// p < (1 - level) / 2 (the Clopper-Pearson lower bound of b / n exceeds m),
// pass when b / n <= m, inconclusive in between. The flips are tested on
// their own, not against the fixes: flips offset by as many fixes leave every
// rate and McNemar's b-vs-c test unchanged, yet each is an item a user now
// sees fail. 5 flips and 5 fixes on 40 items fail at m = 0.03.
//
// Sample size: a gate judged on fewer than min_items items (GateConfig
// default 30, per metric min_items) cannot pass: it is inconclusive and says
// so; a quantile q also needs n with q^n < (1 - level) / 2, so that the
// largest item bounds it (p90 at 95%: 36 items; p99: 368). A failure stays a
// failure however few the items: its whole interval is past the bound.
//
// NLL units: NLL and perplexity gates compare nats per reference token, or
// nats per UTF-8 byte of reference text (sum(nll) / sum(bytes), from
// ItemResult::reference_bytes and GenericResult::row_bytes) when the run's
// two tokenizer sha256s are both set and differ, or nll_unit is byte:
// per-token figures of two vocabularies are not comparable. GateResult::unit
// says which; an item without bytes then skips the gate.
//
// Rows that did not finish (ItemResult::unfinished) make the generation
// gates of that scenario and pair of arms (keyword, exact match, ROUGE-L,
// token F1, negative flips, latency) inconclusive, naming how many and the
// first reason; unscored rows (ItemResult::unscored, or a generic row with
// tokens in one arm only) do the same to NLL and perplexity gates. They are
// never scored as 0.
//
// Nothing is silently skipped: a configured gate that cannot be judged (an
// arm or the recorded reference absent, no item with a keyword rule, no
// reference token scored, ROUGE-L / token F1 0 on every item of both arms,
// latencies 0 or measured biased (RunResult::latency_biased, why starting
// "biased: "), a reference value of 0 under a relative rule) is a GateResult
// with verdict skipped, estimate / low / high NaN and why. When base-quality
// gates are configured but none was judged (no generic set and no arms
// without adapters), one inconclusive gate ("generic", "base_quality") says
// so, because scenario metrics after retraining cannot reject a damaged base.
//
// GateResult naming: metric is the config key ("keyword_rate", "ttft_p90");
// no-adapter gates are "no_adapter.<metric>" so they never attach to the
// adapter arms' bars; against is "absolute", "online" or "recorded"; rule is
// the config key ("floor", "max_drop", "max_rise_rel", "max_rate", ...);
// margin is the configured value (positive for margins; the bound itself for
// floors and ceilings); estimate, low and high are candidate - reference,
// candidate / reference - 1 for *_rel rules, the candidate's value for
// absolute rules, or the flip rate; n is the items (rows) judged; optional
// is the gates file's `optional` of the metric or its section (see
// overall_verdict).
//
// Pure functions and plain structs; safe to use from many threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "evaluator/bootstrap.h"
#include "evaluator/eval_types.h"

namespace loragate::eval {

// The rules on one metric; an unset rule is not checked. Which rules a metric
// accepts depends on its direction and kind (see configs/gates.yaml).
struct MetricGate {
  std::optional<double> floor;            // higher is better: the candidate's value must be >= floor
  std::optional<double> ceiling;          // lower is better: the candidate's value must be <= ceiling
  std::optional<double> max_drop;         // higher is better: candidate - reference must be >= -max_drop
  std::optional<double> max_rise;         // lower is better: candidate - reference must be <= max_rise
  std::optional<double> max_rise_rel;     // lower is better: candidate / reference - 1 must be <= max_rise_rel
  std::optional<double> min_abs_rise_ms;  // latency, with max_rise_rel: a rise must also exceed this many ms
  std::optional<double> max_rate;         // negative_flip_rate: the flip rate must not be shown above it
  std::optional<int64_t> min_items;       // overrides GateConfig::min_items for this metric
  bool optional = false;                  // skipped or inconclusive, it does not make the run inconclusive
  bool any() const { return floor || ceiling || max_drop || max_rise || max_rise_rel || max_rate; }
  bool operator==(const MetricGate&) const = default;
};

// The gates on a scenario's aggregate metrics (ArmMetrics names).
struct ScenarioGates {
  MetricGate keyword_rate;        // higher is better; items without a keyword rule are not counted
  MetricGate exact_match_rate;    // higher is better
  MetricGate rougeL_f1;           // higher is better
  MetricGate token_f1;            // higher is better
  MetricGate nll_mean;            // lower is better; token- (or byte-) weighted over the items
  MetricGate perplexity;          // lower is better; exp(nll_mean)
  MetricGate negative_flip_rate;  // adapter only: max_rate
  bool optional = false;          // every gate of the section is optional
  bool operator==(const ScenarioGates&) const = default;
};

// Base quality on the generic set (no adapters), rows paired.
struct GenericGates {
  MetricGate nll_mean;    // lower is better; token- (or byte-) weighted over the rows
  MetricGate perplexity;  // lower is better
  bool optional = false;
  bool operator==(const GenericGates&) const = default;
};

// Latency: quantiles of the per-item ItemResult::ttft_ms / tpot_ms, items
// paired; ceiling, max_rise and min_abs_rise_ms in milliseconds.
struct LatencyGates {
  MetricGate ttft_p50;
  MetricGate ttft_p90;
  MetricGate ttft_p99;
  MetricGate tpot_p50;
  MetricGate tpot_p90;
  MetricGate tpot_p99;
  bool optional = false;
  bool operator==(const LatencyGates&) const = default;
};

// Whether NLL gates compare nats per token or per byte of reference text.
enum class NllUnit {
  kAuto,  // per byte when the two bases' tokenizers differ (both sha256s known), else per token
  kByte,  // always per byte
};

struct GateConfig {
  int64_t min_items = 30;          // fewer items (rows) judged: inconclusive
  NllUnit nll_unit = NllUnit::kAuto;
  ScenarioGates adapter;           // candidate + retrained adapter vs online + its adapter
  ScenarioGates recorded;          // candidate vs the recorded reference; margins only, no floors / ceilings
  ScenarioGates no_adapter;        // base quality: candidate_no_adapter vs online_no_adapter
  GenericGates generic;            // base quality: the generic set, candidate vs online
  LatencyGates latency;            // candidate vs online, per scenario
  BootstrapOptions bootstrap;      // samples and seed of the bootstraps; level of every interval
  bool operator==(const GateConfig&) const = default;

  // The shipped gates: exactly what configs/gates.yaml says (a test checks
  // that they agree). A default-constructed GateConfig has no gates at all.
  static GateConfig defaults();
  // Reads gates YAML onto defaults(): a key given replaces that value, a key
  // given as null (or a metric or section left empty) turns its rules off,
  // and an unknown key, a value of the wrong type or out of range is
  // kInvalidArgument naming `source` and the key path.
  static Result<GateConfig> parse(const std::string& yaml, const std::string& source);
  // The same onto `base` (GateConfig{} to read a file that must state every rule).
  static Result<GateConfig> parse(const std::string& yaml, const std::string& source, const GateConfig& base);
  static Result<GateConfig> load(const std::string& path);

  // This config as gates YAML stating every section, metric and rule (null
  // for an unset one), so that parse() gives it back whatever the defaults of
  // the reading version are: the text to store with a run and judge it by later.
  std::string to_yaml() const;
  // defaults().to_yaml(): the shipped gates without configs/gates.yaml's comments.
  static std::string defaults_text();
};

// The verdict of an interval against a lower bound (pass low >= bound, fail
// high < bound) or an upper bound (pass high <= bound, fail low > bound);
// inconclusive when it straddles the bound or is NaN.
Verdict judge_at_least(const Interval& interval, double bound);
Verdict judge_at_most(const Interval& interval, double bound);

// The recorded reference of a run: a stored run's measurement of today's
// online base on the same suite content, and which of its arms that is
// ("online", or "candidate" when today's online base was that run's
// candidate). `run` null = none.
struct RecordedReference {
  const RunResult* run = nullptr;
  std::string arm = "online";
};

// Every configured gate on `run` (scenarios in run order: adapter, recorded,
// no_adapter, latency gates; then generic), against `recorded`'s arm when it
// has a run of the same suite (suite_sha256). Items are paired by id. Gates
// that cannot be judged are in the list with verdict skipped and why.
std::vector<GateResult> evaluate_gates(const GateConfig& config, const RunResult& run,
                                       const RecordedReference& recorded);

// The worst verdict: fail > inconclusive > pass. A skipped gate that is not
// optional makes the run inconclusive when it is an adapter, recorded or
// latency gate (skipped base-quality gates are covered by the "base_quality"
// gate). An optional gate informs: failing, it fails the run; skipped or
// inconclusive, it leaves the verdict alone (in-process latency on a busy
// machine often cannot bound a 40-item p90, yet a measured 3x rise still
// fails). No gate judged at all is inconclusive: nothing was shown.
Verdict overall_verdict(const std::vector<GateResult>& gates);

}  // namespace loragate::eval
