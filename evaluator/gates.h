// The gates of a base swap: rules that turn a run's per-item results into
// pass / fail / inconclusive, each with a bootstrap confidence interval.
//
// Gates, per scenario unless noted:
// * adapter: candidate (candidate base + the adapter retrained for it)
//   against online (online base + its adapter): non-inferiority margins
//   (max_drop for higher-is-better metrics, max_rise / max_rise_rel for
//   lower-is-better ones) and absolute floors / ceilings on the candidate;
// * recorded: candidate against a previous run's online arm (only when a
//   recorded run is given);
// * no_adapter (base quality): candidate_no_adapter against online_no_adapter;
// * generic (base quality, scenario "generic"): the candidate base's
//   perplexity on the generic set against online's, rows paired;
// * latency: ratios of per-item TTFT / time-per-output-token quantiles,
//   candidate against online.
// Base quality is on by default because retrained adapters hide a damaged
// base: on the shared fixtures candidate-bad scores keyword 1.000 with its
// adapters, while its generic perplexity is 9.29 against online's 3.35.
//
// Intervals come from a paired bootstrap over items (bootstrap.h); for a
// difference d = candidate - reference and margin m:
// * higher is better (max_drop m): pass when low >= -m, fail when high < -m;
// * lower is better (max_rise m, or max_rise_rel m on candidate/reference - 1):
//   pass when high <= m, fail when low > m;
// * floor f on the candidate's value: pass when low >= f, fail when high < f;
//   ceiling c: pass when high <= c, fail when low > c;
// * otherwise inconclusive: the interval straddles the bound.
//
// A gate whose data is missing is skipped: it is left out of the results
// (a skipped gate is neither evidence for nor against the candidate), and the
// reason goes to the optional `skipped` list. Missing means: an arm or the
// recorded run absent; no item with a keyword rule; no reference token
// scored; ROUGE-L / token F1 0 on every item of both arms (not computed);
// latencies 0 (not measured); a reference value of 0 under a relative rule.
// One exception guards the swap itself: when base-quality gates are configured
// but none had data (no generic set and no arms without adapters), a single
// inconclusive gate ("generic", "base_quality") says so, because scenario
// metrics after retraining cannot reject a damaged base.
//
// GateResult naming: metric is the config key ("keyword_rate", "ttft_p99");
// no-adapter gates are "no_adapter.<metric>" so they never attach to the
// adapter arms' bars; against is "absolute", "online" or "recorded"; rule is
// the config key ("floor", "max_drop", "max_rise_rel", ...); margin is the
// configured value (positive for margins; the bound itself for floors and
// ceilings); estimate, low and high are candidate - reference,
// candidate / reference - 1 for *_rel rules, or the candidate's value for
// absolute rules.
//
// Pure functions and plain structs; safe to use from many threads.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "evaluator/bootstrap.h"
#include "evaluator/eval_types.h"

namespace loragate::eval {

// The rules on one metric; an unset rule is not checked. Which rules a metric
// accepts depends on its direction (see configs/gates.yaml).
struct MetricGate {
  std::optional<double> floor;         // higher is better: the candidate's value must be >= floor
  std::optional<double> ceiling;       // lower is better: the candidate's value must be <= ceiling
  std::optional<double> max_drop;      // higher is better: candidate - reference must be >= -max_drop
  std::optional<double> max_rise;      // lower is better: candidate - reference must be <= max_rise
  std::optional<double> max_rise_rel;  // lower is better: candidate / reference - 1 must be <= max_rise_rel
  bool any() const { return floor || ceiling || max_drop || max_rise || max_rise_rel; }
  bool operator==(const MetricGate&) const = default;
};

// The gates on a scenario's aggregate metrics (ArmMetrics names).
struct ScenarioGates {
  MetricGate keyword_rate;      // higher is better; items without a keyword rule are not counted
  MetricGate exact_match_rate;  // higher is better
  MetricGate rougeL_f1;         // higher is better
  MetricGate token_f1;          // higher is better
  MetricGate nll_mean;          // lower is better; token-weighted over the items
  MetricGate perplexity;        // lower is better; exp(nll_mean)
  bool operator==(const ScenarioGates&) const = default;
};

// Base quality on the generic set (no adapters), rows paired.
struct GenericGates {
  MetricGate nll_mean;    // lower is better; token-weighted over the rows
  MetricGate perplexity;  // lower is better
  bool operator==(const GenericGates&) const = default;
};

// Latency: quantiles of the per-item ItemResult::ttft_ms / tpot_ms, items
// paired; ceiling and max_rise in milliseconds.
struct LatencyGates {
  MetricGate ttft_p50;
  MetricGate ttft_p99;
  MetricGate tpot_p50;
  MetricGate tpot_p99;
  bool operator==(const LatencyGates&) const = default;
};

struct GateConfig {
  // Latencies below this count as this (ms): differences under it are timer
  // and scheduling noise on a shared machine, not a regression.
  double latency_floor_ms = 5.0;
  ScenarioGates adapter;       // candidate + retrained adapter vs online + its adapter
  ScenarioGates recorded;      // candidate vs a recorded run's online arm; margins only, no floors / ceilings
  ScenarioGates no_adapter;    // base quality: candidate_no_adapter vs online_no_adapter
  GenericGates generic;        // base quality: the generic set, candidate vs online
  LatencyGates latency;        // candidate vs online, per scenario
  BootstrapOptions bootstrap;  // the intervals of every gate
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
// has a run. Items are paired by id (by position when both arms list the
// same ids). Skipped gates are left out; a line per skipped metric
// or section ("mia ttft_p99: no latencies measured (0 on every item)",
// "recorded: no recorded run given") goes to `skipped` when it is not null.
std::vector<GateResult> evaluate_gates(const GateConfig& config, const RunResult& run,
                                       const RecordedReference& recorded,
                                       std::vector<std::string>* skipped = nullptr);

// The worst verdict: fail > inconclusive > pass. No gates at all is
// inconclusive: nothing was shown about the candidate.
Verdict overall_verdict(const std::vector<GateResult>& gates);

}  // namespace loragate::eval
