// The judge of a run: each configured gate's bootstrap interval turned into a
// verdict with its `why` line, evaluate_gates over every section, and the
// overall verdict. The config lives in gate_config.cpp, the per-item series in
// gate_series.cpp.
#include "evaluator/gates.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

#include "evaluator/gate_metrics.h"
#include "evaluator/gate_series.h"

namespace loragate::eval {
namespace gates_detail {
namespace {

// --- verdict lines ---------------------------------------------------------------

std::string format_value(Format f, double v) {
  switch (f) {
    case Format::kRate: return format_number("%.3f", v);
    case Format::kNumber: return format_number("%.4g", v);
    case Format::kMs: return format_number("%.4g", v) + " ms";
  }
  return format_number("%g", v);
}

std::string format_difference(Format f, double d) {
  switch (f) {
    case Format::kRate: return format_number("%+.3f", d);
    case Format::kNumber: return format_number("%+.3g", d);
    case Format::kMs: return format_number("%+.4g", d) + " ms";
  }
  return format_number("%+g", d);
}

std::string format_relative(double r) { return format_number("%+.1f", 100.0 * r) + "%"; }

std::string format_margin(Format f, const std::string& rule, double m) {
  if (rule == "max_rise_rel") return format_number("%g", 100.0 * m) + "%";
  return format_number("%g", m) + (f == Format::kMs ? " ms" : "");
}

// What the verdict says about the bound, per kind of bound.
const char* phrase(Verdict v, bool lower_bound, bool absolute) {
  if (absolute && lower_bound) return v == Verdict::kPass ? "meets" : v == Verdict::kFail ? "is below" : "may be below";
  if (absolute) return v == Verdict::kPass ? "is within" : v == Verdict::kFail ? "exceeds" : "may exceed";
  return v == Verdict::kPass ? "within" : v == Verdict::kFail ? "exceeds" : "may exceed";
}

// --- judging ------------------------------------------------------------------------

// Everything a metric's gates need: the two paired series and the words for its line.
struct Comparison {
  std::string scenario;        // GateResult::scenario
  std::string metric;          // GateResult::metric
  std::string against;         // "online" or "recorded"
  std::string what;            // "candidate perplexity without adapters"
  std::string reference_name;  // "online", "recorded online"
  std::string unit;            // "items" or "rows"
  std::string where;           // names the gate in skipped lines: "mia recorded nll_mean"
  Format format = Format::kNumber;
  ArmSeries candidate, reference;
};

class Judge {
 public:
  Judge(const BootstrapOptions& options, std::vector<std::string>* skipped)
      : options_(options), skipped_(skipped), level_(format_number("%g", 100.0 * options.level) + "%") {}

  void skip(const std::string& where, const std::string& why) {
    if (skipped_ != nullptr) skipped_->push_back(where + ": " + why);
  }

  // Runs every rule `gate` sets on `c`, adding one GateResult per rule.
  void judge(const MetricGate& gate, const Comparison& c) {
    const size_t n = c.candidate.num.size();
    const SampleStatistic candidate = [&](const std::vector<uint32_t>& s) { return c.candidate.on(s); };
    const SampleStatistic difference = [&](const std::vector<uint32_t>& s) {
      return c.candidate.on(s) - c.reference.on(s);
    };
    const SampleStatistic relative = [&](const std::vector<uint32_t>& s) {
      return c.candidate.on(s) / c.reference.on(s) - 1.0;
    };
    if (gate.floor) add_absolute(c, "floor", *gate.floor, paired_bootstrap(n, candidate, options_), true);
    if (gate.ceiling) add_absolute(c, "ceiling", *gate.ceiling, paired_bootstrap(n, candidate, options_), false);
    if (gate.max_drop) add_margin(c, "max_drop", *gate.max_drop, paired_bootstrap(n, difference, options_));
    if (gate.max_rise) add_margin(c, "max_rise", *gate.max_rise, paired_bootstrap(n, difference, options_));
    if (gate.max_rise_rel) {
      const double reference = c.reference.on(all_indices(n));
      if (!(reference > 0) || !std::isfinite(reference)) {
        skip(c.where + " max_rise_rel",
             c.reference_name + " value is " + format_value(c.format, reference) + ", so a relative rise is undefined");
      } else {
        add_margin(c, "max_rise_rel", *gate.max_rise_rel, paired_bootstrap(n, relative, options_));
      }
    }
  }

  void add(GateResult g) { results_.push_back(std::move(g)); }
  std::vector<GateResult>& results() { return results_; }

 private:
  static std::vector<uint32_t> all_indices(size_t n) {
    std::vector<uint32_t> all(n);
    for (size_t i = 0; i < n; ++i) all[i] = static_cast<uint32_t>(i);
    return all;
  }

  std::string sample_size(const Comparison& c) const {
    return std::to_string(c.candidate.num.size()) + " " + c.unit;
  }

  // A floor or ceiling on the candidate's own value.
  void add_absolute(const Comparison& c, const std::string& rule, double bound, const Interval& iv, bool lower) {
    GateResult g = base(c, "absolute", rule, bound, iv);
    g.verdict = lower ? judge_at_least(iv, bound) : judge_at_most(iv, bound);
    g.why = c.what + " " + format_value(c.format, iv.estimate) + " (" + level_ + " CI " +
            format_value(c.format, iv.low) + ".." + format_value(c.format, iv.high) + ", " + sample_size(c) + ") " +
            phrase(g.verdict, lower, true) + " " + rule + " " + format_margin(c.format, rule, bound);
    results_.push_back(std::move(g));
  }

  // A margin on candidate - reference (max_drop, max_rise) or candidate / reference - 1 (max_rise_rel).
  void add_margin(const Comparison& c, const std::string& rule, double margin, const Interval& iv) {
    GateResult g = base(c, c.against, rule, margin, iv);
    const bool lower = rule == "max_drop";
    g.verdict = lower ? judge_at_least(iv, -margin) : judge_at_most(iv, margin);
    const bool rel = rule == "max_rise_rel";
    auto diff = [&](double d) { return rel ? format_relative(d) : format_difference(c.format, d); };
    const std::vector<uint32_t> all = all_indices(c.candidate.num.size());
    g.why = c.what + " " + format_value(c.format, c.candidate.on(all)) + " vs " + c.reference_name + " " +
            format_value(c.format, c.reference.on(all)) + " (" + diff(iv.estimate) + ", " + level_ + " CI " +
            diff(iv.low) + ".." + diff(iv.high) + ", " + sample_size(c) + ") " + phrase(g.verdict, lower, false) +
            " " + rule + " " + format_margin(c.format, rule, margin);
    results_.push_back(std::move(g));
  }

  static GateResult base(const Comparison& c, const std::string& against, const std::string& rule, double margin,
                         const Interval& iv) {
    GateResult g;
    g.scenario = c.scenario;
    g.metric = c.metric;
    g.against = against;
    g.rule = rule;
    g.estimate = iv.estimate;
    g.low = iv.low;
    g.high = iv.high;
    g.margin = margin;
    return g;
  }

  BootstrapOptions options_;
  std::vector<std::string>* skipped_;
  std::string level_;  // "95%"
  std::vector<GateResult> results_;
};

// The scenario-metric gates of one section (adapter, recorded, no_adapter) on a pair of arms.
void judge_scenario_section(Judge& judge, const ScenarioGates& gates, const std::string& scenario,
                            const ArmResult& candidate, const ArmResult& reference, const std::string& metric_prefix,
                            const std::string& against, const std::string& what_suffix,
                            const std::string& reference_name) {
  const ItemPairs pairs = pair_items(candidate, reference);
  for (const auto& m : kScenarioMetrics) {
    const MetricGate& gate = gates.*m.gate;
    if (!gate.any()) continue;
    Comparison c;
    c.scenario = scenario;
    c.metric = metric_prefix + m.name;
    c.against = against;
    c.what = std::string("candidate ") + m.name + what_suffix;
    c.reference_name = reference_name;
    c.unit = "items";
    c.format = m.format;
    c.where = scenario + " " + (against == "recorded" ? "recorded " : "") + c.metric;
    c.candidate = item_series(pairs, true, m.name);
    c.reference = item_series(pairs, false, m.name);
    const std::string missing = missing_data(m.name, c.candidate, c.reference);
    if (!missing.empty()) {
      judge.skip(c.where, missing);
      continue;
    }
    judge.judge(gate, c);
  }
}

constexpr size_t kMinItemsForTailLatency = 100;

void judge_latency(Judge& judge, const LatencyGates& gates, double floor_ms, const std::string& scenario,
                   const ArmResult& candidate, const ArmResult& online) {
  const ItemPairs pairs = pair_items(candidate, online);
  for (size_t k = 0; k < std::size(kLatencyMetrics); ++k) {
    const auto& m = kLatencyMetrics[k];
    const MetricGate& gate = gates.*m.gate;
    if (!gate.any()) continue;
    Comparison c;
    c.scenario = scenario;
    c.metric = m.name;
    c.against = "online";
    c.what = std::string("candidate ") + m.name;
    c.reference_name = "online";
    c.unit = "items";
    c.format = Format::kMs;
    c.where = scenario + " " + c.metric;
    c.candidate.stat = c.reference.stat = ArmSeries::Stat::kQuantile;
    c.candidate.q = c.reference.q = kLatencySources[k].q;
    // 0 is "not measured" (e.g. no time per output token after a single
    // token), so such items leave both arms' quantiles.
    for (const auto& p : pairs) {
      const double a = p.first->*kLatencySources[k].field, b = p.second->*kLatencySources[k].field;
      if (a > 0 && b > 0) {
        c.candidate.num.push_back(std::max(a, floor_ms));
        c.reference.num.push_back(std::max(b, floor_ms));
      }
    }
    if (c.candidate.num.empty()) {
      judge.skip(c.where, "no latencies measured (0 on every item)");
      continue;
    }
    // The p99 of fewer than 100 items is their maximum: one descheduled
    // request decides it, so such a gate would judge the machine, not the base.
    if (kLatencySources[k].q >= 0.99 && c.candidate.num.size() < kMinItemsForTailLatency) {
      judge.skip(c.where, "a p99 needs at least " + std::to_string(kMinItemsForTailLatency) + " items, got " +
                              std::to_string(c.candidate.num.size()));
      continue;
    }
    judge.judge(gate, c);
  }
}

void judge_generic(Judge& judge, const GenericGates& gates, const GenericResult& candidate,
                   const GenericResult& online) {
  if (candidate.row_nll_sum.size() != online.row_nll_sum.size() ||
      candidate.row_tokens.size() != candidate.row_nll_sum.size() ||
      online.row_tokens.size() != online.row_nll_sum.size()) {
    judge.skip("generic", "the arms scored different rows (" + std::to_string(candidate.row_nll_sum.size()) +
                              " vs " + std::to_string(online.row_nll_sum.size()) + ")");
    return;
  }
  for (const auto& m : kGenericMetrics) {
    const MetricGate& gate = gates.*m.gate;
    if (!gate.any()) continue;
    Comparison c;
    c.scenario = "generic";
    c.metric = m.name;
    c.against = "online";
    c.what = std::string("candidate ") + m.name + " on the generic set";
    c.reference_name = "online";
    c.unit = "rows";
    c.format = m.format;
    c.where = "generic " + c.metric;
    const ArmSeries::Stat stat = std::string(m.name) == "perplexity" ? ArmSeries::Stat::kExpRatio : ArmSeries::Stat::kRatio;
    c.candidate.stat = c.reference.stat = stat;
    c.candidate.num = candidate.row_nll_sum;
    c.reference.num = online.row_nll_sum;
    for (int64_t t : candidate.row_tokens) c.candidate.den.push_back(static_cast<double>(t));
    for (int64_t t : online.row_tokens) c.reference.den.push_back(static_cast<double>(t));
    if (c.candidate.num.empty() || c.candidate.den_sum() == 0 || c.reference.den_sum() == 0) {
      judge.skip(c.where, "no generic tokens scored");
      continue;
    }
    judge.judge(gate, c);
  }
}

}  // namespace
}  // namespace gates_detail

// --- verdicts ---------------------------------------------------------------------------

Verdict judge_at_least(const Interval& interval, double bound) {
  if (interval.low >= bound) return Verdict::kPass;
  if (interval.high < bound) return Verdict::kFail;
  return Verdict::kInconclusive;  // straddles the bound, or NaN
}

Verdict judge_at_most(const Interval& interval, double bound) {
  if (interval.high <= bound) return Verdict::kPass;
  if (interval.low > bound) return Verdict::kFail;
  return Verdict::kInconclusive;
}

std::vector<GateResult> evaluate_gates(const GateConfig& config, const RunResult& run,
                                       const RecordedReference& reference, std::vector<std::string>* skipped) {
  const RunResult* recorded = reference.run;
  using namespace gates_detail;
  Judge judge(config.bootstrap, skipped);
  size_t base_quality_gates = 0;
  auto count_since = [&](size_t before) { base_quality_gates += judge.results().size() - before; };
  const bool want_recorded = section_has_rules(config.recorded);
  if (want_recorded && recorded == nullptr) judge.skip("recorded", "no recorded run given");
  const std::string recorded_name = recorded != nullptr && recorded->id > 0
                                        ? "recorded " + reference.arm + " (run " + std::to_string(recorded->id) + ")"
                                        : "recorded " + reference.arm;

  for (const ScenarioResult& s : run.scenarios) {
    const ArmResult* online = find_arm(s, "online");
    const ArmResult* candidate = find_arm(s, "candidate");
    const bool both = online != nullptr && candidate != nullptr;
    const std::string no_pair = std::string("no ") + (online == nullptr ? "online" : "candidate") + " arm";

    if (section_has_rules(config.adapter)) {
      if (both) {
        judge_scenario_section(judge, config.adapter, s.name, *candidate, *online, "", "online", "", "online");
      } else {
        judge.skip(s.name + " adapter", no_pair);
      }
    }

    if (want_recorded && recorded != nullptr) {
      const ArmResult* previous = nullptr;
      for (const ScenarioResult& r : recorded->scenarios) {
        if (r.name == s.name) previous = find_arm(r, reference.arm);
      }
      if (candidate == nullptr) {
        judge.skip(s.name + " recorded", "no candidate arm");
      } else if (previous == nullptr) {
        judge.skip(s.name + " recorded", "the recorded run has no " + reference.arm + " arm for this scenario");
      } else {
        judge_scenario_section(judge, config.recorded, s.name, *candidate, *previous, "", "recorded", "",
                               recorded_name);
      }
    }

    if (section_has_rules(config.no_adapter)) {
      const ArmResult* online_bare = find_arm(s, "online_no_adapter");
      const ArmResult* candidate_bare = find_arm(s, "candidate_no_adapter");
      if (online_bare != nullptr && candidate_bare != nullptr) {
        const size_t before = judge.results().size();
        judge_scenario_section(judge, config.no_adapter, s.name, *candidate_bare, *online_bare, "no_adapter.",
                               "online", " without adapters", "online");
        count_since(before);
      } else {
        judge.skip(s.name + " no_adapter",
                   std::string("no ") + (online_bare == nullptr ? "online_no_adapter" : "candidate_no_adapter") +
                       " arm");
      }
    }

    if (section_has_rules(config.latency)) {
      if (both) {
        judge_latency(judge, config.latency, config.latency_floor_ms, s.name, *candidate, *online);
      } else {
        judge.skip(s.name + " latency", no_pair);
      }
    }
  }

  if (section_has_rules(config.generic)) {
    const GenericResult* online = find_generic(run, "online");
    const GenericResult* candidate = find_generic(run, "candidate");
    if (online != nullptr && candidate != nullptr) {
      const size_t before = judge.results().size();
      judge_generic(judge, config.generic, *candidate, *online);
      count_since(before);
    } else {
      judge.skip("generic", "no generic set scored");
    }
  }

  // Retrained adapters hide a damaged base (candidate-bad scores keyword 1.000
  // with them), so a run that could not look at base quality must not pass.
  if ((section_has_rules(config.no_adapter) || section_has_rules(config.generic)) && base_quality_gates == 0) {
    GateResult g;
    g.scenario = "generic";
    g.metric = "base_quality";
    g.against = "online";
    g.rule = "required";
    g.verdict = Verdict::kInconclusive;
    g.estimate = g.low = g.high = kNoEstimate;
    g.why = "no base-quality data (no generic set scored, no arms without adapters): scenario metrics after "
            "retraining cannot show a damaged base";
    judge.add(std::move(g));
  }
  return std::move(judge.results());
}

Verdict overall_verdict(const std::vector<GateResult>& gates) {
  if (gates.empty()) return Verdict::kInconclusive;
  Verdict worst = Verdict::kPass;
  for (const GateResult& g : gates) {
    if (g.verdict == Verdict::kFail) return Verdict::kFail;
    if (g.verdict == Verdict::kInconclusive) worst = Verdict::kInconclusive;
  }
  return worst;
}

}  // namespace loragate::eval
