#include "evaluator/gates.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

namespace loragate::eval {
namespace {

constexpr double kNoEstimate = std::numeric_limits<double>::quiet_NaN();

// --- the metrics each section knows ------------------------------------------

// How a metric's numbers are written in a `why` line.
enum class Format {
  kRate,    // a fraction in [0, 1]: 0.775, differences +0.050
  kNumber,  // NLL, perplexity: 4 significant digits
  kMs,      // latency in milliseconds
};

template <typename Gates>
struct MetricKey {
  const char* name;
  MetricGate Gates::*gate;
  bool higher_better;
  Format format;
};

constexpr MetricKey<ScenarioGates> kScenarioMetrics[] = {
    {"keyword_rate", &ScenarioGates::keyword_rate, true, Format::kRate},
    {"exact_match_rate", &ScenarioGates::exact_match_rate, true, Format::kRate},
    {"rougeL_f1", &ScenarioGates::rougeL_f1, true, Format::kRate},
    {"token_f1", &ScenarioGates::token_f1, true, Format::kRate},
    {"nll_mean", &ScenarioGates::nll_mean, false, Format::kNumber},
    {"perplexity", &ScenarioGates::perplexity, false, Format::kNumber},
};

constexpr MetricKey<GenericGates> kGenericMetrics[] = {
    {"nll_mean", &GenericGates::nll_mean, false, Format::kNumber},
    {"perplexity", &GenericGates::perplexity, false, Format::kNumber},
};

constexpr MetricKey<LatencyGates> kLatencyMetrics[] = {
    {"ttft_p50", &LatencyGates::ttft_p50, false, Format::kMs},
    {"ttft_p99", &LatencyGates::ttft_p99, false, Format::kMs},
    {"tpot_p50", &LatencyGates::tpot_p50, false, Format::kMs},
    {"tpot_p99", &LatencyGates::tpot_p99, false, Format::kMs},
};

// Which ItemResult field and quantile a latency metric reads (same order as kLatencyMetrics).
struct LatencySource {
  double ItemResult::*field;
  double q;
};
constexpr LatencySource kLatencySources[] = {
    {&ItemResult::ttft_ms, 0.50}, {&ItemResult::ttft_ms, 0.99},
    {&ItemResult::tpot_ms, 0.50}, {&ItemResult::tpot_ms, 0.99}};

struct RuleKey {
  const char* name;
  std::optional<double> MetricGate::*value;
};
constexpr RuleKey kRules[] = {{"floor", &MetricGate::floor},
                              {"ceiling", &MetricGate::ceiling},
                              {"max_drop", &MetricGate::max_drop},
                              {"max_rise", &MetricGate::max_rise},
                              {"max_rise_rel", &MetricGate::max_rise_rel}};

// The rules a metric accepts: by direction, and without the absolute bounds
// where the section compares against a reference only (recorded).
std::vector<std::string> accepted_rules(bool higher_better, bool absolute) {
  std::vector<std::string> rules;
  if (higher_better) {
    if (absolute) rules.push_back("floor");
    rules.push_back("max_drop");
  } else {
    if (absolute) rules.push_back("ceiling");
    rules.push_back("max_rise");
    rules.push_back("max_rise_rel");
  }
  return rules;
}

bool section_has_rules(const ScenarioGates& g) {
  for (const auto& m : kScenarioMetrics) {
    if ((g.*m.gate).any()) return true;
  }
  return false;
}

bool section_has_rules(const GenericGates& g) { return g.nll_mean.any() || g.perplexity.any(); }

bool section_has_rules(const LatencyGates& g) {
  for (const auto& m : kLatencyMetrics) {
    if ((g.*m.gate).any()) return true;
  }
  return false;
}

std::string format_number(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// --- YAML ----------------------------------------------------------------------

// A mapping at a key path (e.g. "adapter.keyword_rate"), for messages that name the key.
class YamlMap {
 public:
  YamlMap(YAML::Node node, std::string path) : node_(std::move(node)), path_(std::move(path)) {}

  // Absent and null are "given as nothing"; anything else must be a mapping.
  bool absent() const { return !node_.IsDefined(); }
  bool null() const { return node_.IsDefined() && node_.IsNull(); }

  Status check_keys(const std::vector<std::string>& known) const {
    if (absent() || null()) return Status::ok();
    if (!node_.IsMap()) return Status::invalid_argument(path_ + ": must be a mapping (keys: " + join(known) + ")");
    for (const auto& kv : node_) {
      const std::string key = kv.first.as<std::string>();
      bool found = false;
      for (const std::string& k : known) found = found || k == key;
      if (!found) return Status::invalid_argument(key_path(key) + ": unknown key (known: " + join(known) + ")");
    }
    return Status::ok();
  }

  YamlMap child(const std::string& key) const {
    return YamlMap(absent() || null() ? YAML::Node(YAML::NodeType::Undefined) : node_[key], key_path(key));
  }

  // Reads a number in [min, max] into `out`; absent keeps it, null resets it.
  Status read_rule(const std::string& key, std::optional<double>& out, double min, double max) const {
    const YAML::Node v = absent() || null() ? YAML::Node(YAML::NodeType::Undefined) : node_[key];
    if (!v.IsDefined()) return Status::ok();
    if (v.IsNull()) {
      out.reset();
      return Status::ok();
    }
    double x = 0;
    LG_RETURN_IF_ERROR(as_number(key, v, x));
    if (!(x >= min && x <= max)) {
      return Status::invalid_argument(key_path(key) + ": " + format_number("%g", x) + " is outside [" +
                                      format_number("%g", min) + ", " + format_number("%g", max) + "]");
    }
    out = x;
    return Status::ok();
  }

  template <typename T>
  Status read(const std::string& key, T& out) const {
    const YAML::Node v = absent() || null() ? YAML::Node(YAML::NodeType::Undefined) : node_[key];
    if (!v.IsDefined() || v.IsNull()) return Status::ok();
    try {
      out = v.as<T>();
    } catch (const YAML::Exception&) {
      return Status::invalid_argument(key_path(key) + ": wrong type for value '" + YAML::Dump(v) + "'");
    }
    return Status::ok();
  }

  std::string key_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

 private:
  Status as_number(const std::string& key, const YAML::Node& v, double& out) const {
    const Status wrong = Status::invalid_argument(key_path(key) + ": must be a number, not '" + YAML::Dump(v) + "'");
    if (!v.IsScalar()) return wrong;
    try {
      out = v.as<double>();
    } catch (const YAML::Exception&) {
      return wrong;
    }
    return Status::ok();
  }

  YAML::Node node_;
  std::string path_;
};

// One metric's rules. Given as null (or empty), all of them are turned off.
Status parse_metric(const YamlMap& m, bool higher_better, Format format, bool absolute, MetricGate& gate) {
  if (m.null()) {
    gate = MetricGate{};
    return Status::ok();
  }
  const std::vector<std::string> rules = accepted_rules(higher_better, absolute);
  LG_RETURN_IF_ERROR(m.check_keys(rules));
  // Rates live in [0, 1], so can their floors and drops; the rest is only >= 0.
  const double max = format == Format::kRate ? 1.0 : 1e12;
  for (const RuleKey& r : kRules) {
    bool accepted = false;
    for (const std::string& name : rules) accepted = accepted || name == r.name;
    if (accepted) LG_RETURN_IF_ERROR(m.read_rule(r.name, gate.*r.value, 0.0, max));
  }
  return Status::ok();
}

template <typename Gates, size_t N>
Status parse_section(const YamlMap& s, const MetricKey<Gates> (&metrics)[N], bool absolute, Gates& gates) {
  if (s.null()) {
    gates = Gates{};
    return Status::ok();
  }
  std::vector<std::string> names;
  for (const auto& m : metrics) names.push_back(m.name);
  LG_RETURN_IF_ERROR(s.check_keys(names));
  for (const auto& m : metrics) {
    const YamlMap metric = s.child(m.name);
    if (!metric.absent()) LG_RETURN_IF_ERROR(parse_metric(metric, m.higher_better, m.format, absolute, gates.*m.gate));
  }
  return Status::ok();
}

Status parse_bootstrap(const YamlMap& s, BootstrapOptions& o) {
  LG_RETURN_IF_ERROR(s.check_keys({"samples", "level", "seed"}));
  int64_t samples = o.samples;
  LG_RETURN_IF_ERROR(s.read("samples", samples));
  // Fewer than 100 resamples cannot place a 95% interval's ends.
  if (samples < 100 || samples > 1'000'000) {
    return Status::invalid_argument(s.key_path("samples") + ": " + std::to_string(samples) +
                                    " is outside [100, 1000000]");
  }
  o.samples = static_cast<int32_t>(samples);
  LG_RETURN_IF_ERROR(s.read("level", o.level));
  if (!(o.level > 0.0 && o.level < 1.0)) {
    return Status::invalid_argument(s.key_path("level") + ": " + format_number("%g", o.level) +
                                    " must be in (0, 1), e.g. 0.95");
  }
  LG_RETURN_IF_ERROR(s.read("seed", o.seed));
  return Status::ok();
}

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

// --- per-item data ------------------------------------------------------------------

// One arm's per-item (or per-row) values of a metric, and how a draw of
// indices turns them into the metric.
struct ArmSeries {
  enum class Stat { kRatio, kExpRatio, kQuantile };
  Stat stat = Stat::kRatio;
  double q = 0.5;               // kQuantile
  std::vector<double> num;      // kRatio: sum(num) / sum(den); kQuantile: the values
  std::vector<double> den;

  double on(const std::vector<uint32_t>& sample) const {
    switch (stat) {
      case Stat::kRatio: return sample_ratio(num, den, sample);
      case Stat::kExpRatio: return std::exp(sample_ratio(num, den, sample));
      case Stat::kQuantile: return sample_quantile(num, sample, q);
    }
    return kNoEstimate;
  }
  double den_sum() const {
    double s = 0;
    for (double d : den) s += d;
    return s;
  }
  bool all_zero() const {
    for (double v : num) {
      if (v != 0) return false;
    }
    return true;
  }
};

using ItemPairs = std::vector<std::pair<const ItemResult*, const ItemResult*>>;

// Candidate and reference items with the same id, in candidate order; by
// position when both arms list the same ids (the usual case: one suite).
ItemPairs pair_items(const ArmResult& candidate, const ArmResult& reference) {
  ItemPairs pairs;
  bool same_ids = candidate.items.size() == reference.items.size();
  for (size_t i = 0; same_ids && i < candidate.items.size(); ++i) same_ids = candidate.items[i].id == reference.items[i].id;
  if (same_ids) {
    for (size_t i = 0; i < candidate.items.size(); ++i) pairs.emplace_back(&candidate.items[i], &reference.items[i]);
    return pairs;
  }
  std::map<std::string, const ItemResult*> by_id;
  for (const ItemResult& r : reference.items) by_id.emplace(r.id, &r);
  for (const ItemResult& c : candidate.items) {
    auto it = by_id.find(c.id);
    if (it != by_id.end()) pairs.emplace_back(&c, it->second);
  }
  return pairs;
}

// A scenario metric of one side (first = candidate, second = reference) of the pairs.
ArmSeries item_series(const ItemPairs& pairs, bool candidate, const std::string& metric) {
  ArmSeries s;
  if (metric == "perplexity") s.stat = ArmSeries::Stat::kExpRatio;
  for (const auto& p : pairs) {
    const ItemResult& it = candidate ? *p.first : *p.second;
    double num = 0, den = 1;
    if (metric == "keyword_rate") {
      num = it.keyword == 1 ? 1 : 0;
      den = it.keyword >= 0 ? 1 : 0;  // items without a keyword rule do not count
    } else if (metric == "exact_match_rate") {
      num = it.exact_match;
    } else if (metric == "rougeL_f1") {
      num = it.rougeL_f1;
    } else if (metric == "token_f1") {
      num = it.token_f1;
    } else {  // nll_mean, perplexity: token-weighted
      num = it.nll_sum;
      den = static_cast<double>(it.n_ref_tokens);
    }
    s.num.push_back(num);
    s.den.push_back(den);
  }
  return s;
}

// Why a scenario metric cannot be judged on these series; "" when it can.
std::string missing_data(const std::string& metric, const ArmSeries& candidate, const ArmSeries& reference) {
  if (candidate.num.empty()) return "no items in common";
  if (metric == "keyword_rate" && (candidate.den_sum() == 0 || reference.den_sum() == 0)) {
    return "no item has a keyword rule";
  }
  if ((metric == "nll_mean" || metric == "perplexity") && (candidate.den_sum() == 0 || reference.den_sum() == 0)) {
    return "no reference tokens scored";
  }
  if ((metric == "rougeL_f1" || metric == "token_f1") && candidate.all_zero() && reference.all_zero()) {
    return "0 on every item of both arms (not computed)";
  }
  return "";
}

const ArmResult* find_arm(const ScenarioResult& s, const std::string& arm) {
  auto it = s.arms.find(arm);
  return it == s.arms.end() ? nullptr : &it->second;
}

const GenericResult* find_generic(const RunResult& run, const std::string& arm) {
  for (const GenericResult& g : run.generic) {
    if (g.arm == arm) return &g;
  }
  return nullptr;
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

// --- config ----------------------------------------------------------------------------

// Keep in step with configs/gates.yaml, which says why each value is what it is.
GateConfig GateConfig::defaults() {
  GateConfig c;
  c.adapter.keyword_rate.floor = 0.80;
  c.adapter.keyword_rate.max_drop = 0.10;
  c.adapter.exact_match_rate.max_drop = 0.15;
  c.adapter.rougeL_f1.max_drop = 0.05;
  c.adapter.token_f1.max_drop = 0.05;
  c.adapter.nll_mean.max_rise = 0.05;

  c.recorded.keyword_rate.max_drop = 0.10;
  c.recorded.exact_match_rate.max_drop = 0.15;
  c.recorded.rougeL_f1.max_drop = 0.05;
  c.recorded.token_f1.max_drop = 0.05;
  c.recorded.nll_mean.max_rise = 0.05;

  c.no_adapter.keyword_rate.max_drop = 0.10;
  c.no_adapter.perplexity.max_rise_rel = 0.10;

  c.generic.perplexity.max_rise_rel = 0.10;

  c.latency.ttft_p99.max_rise_rel = 0.50;
  c.latency.tpot_p50.max_rise_rel = 0.25;

  c.bootstrap.samples = 2000;
  c.bootstrap.level = 0.95;
  c.bootstrap.seed = 1;
  return c;
}

Result<GateConfig> GateConfig::parse(const std::string& yaml, const std::string& source) {
  return parse(yaml, source, defaults());
}

Result<GateConfig> GateConfig::parse(const std::string& yaml, const std::string& source, const GateConfig& base) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(source + ": invalid YAML: " + e.what());
  }
  GateConfig c = base;
  if (root.IsNull()) return c;
  auto in_file = [&](Status s) { return s.with_context(source); };
  const YamlMap top(root, "");
  if (!root.IsMap()) return Status::invalid_argument(source + ": the gates file must be a mapping");
  LG_RETURN_IF_ERROR(
      in_file(top.check_keys({"bootstrap", "latency_floor_ms", "adapter", "recorded", "no_adapter", "generic", "latency"})));
  LG_RETURN_IF_ERROR(in_file(parse_bootstrap(top.child("bootstrap"), c.bootstrap)));
  LG_RETURN_IF_ERROR(in_file(top.read("latency_floor_ms", c.latency_floor_ms)));
  if (!(c.latency_floor_ms >= 0 && c.latency_floor_ms < 1e6)) {
    return Status::invalid_argument(source + ": latency_floor_ms must be >= 0 (milliseconds)");
  }
  LG_RETURN_IF_ERROR(in_file(parse_section(top.child("adapter"), kScenarioMetrics, true, c.adapter)));
  LG_RETURN_IF_ERROR(in_file(parse_section(top.child("recorded"), kScenarioMetrics, false, c.recorded)));
  LG_RETURN_IF_ERROR(in_file(parse_section(top.child("no_adapter"), kScenarioMetrics, true, c.no_adapter)));
  LG_RETURN_IF_ERROR(in_file(parse_section(top.child("generic"), kGenericMetrics, true, c.generic)));
  LG_RETURN_IF_ERROR(in_file(parse_section(top.child("latency"), kLatencyMetrics, true, c.latency)));
  return c;
}

Result<GateConfig> GateConfig::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::not_found("cannot read gates file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

namespace {

// The shortest text strtod reads back as exactly `v`.
std::string exact_number(double v) {
  for (int digits = 15; digits <= 17; ++digits) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) return buf;
  }
  return format_number("%.17g", v);
}

template <typename Gates, size_t N>
void write_section(std::ostringstream& out, const char* name, const MetricKey<Gates> (&metrics)[N], bool absolute,
                   const Gates& gates) {
  out << name << ":\n";
  for (const auto& m : metrics) {
    out << "  " << m.name << ": {";
    const std::vector<std::string> rules = accepted_rules(m.higher_better, absolute);
    for (size_t i = 0; i < rules.size(); ++i) {
      for (const RuleKey& r : kRules) {
        if (rules[i] != r.name) continue;
        const std::optional<double>& v = gates.*m.gate.*r.value;
        out << (i == 0 ? "" : ", ") << r.name << ": " << (v ? exact_number(*v) : "null");
      }
    }
    out << "}\n";
  }
}

}  // namespace

std::string GateConfig::to_yaml() const {
  std::ostringstream out;
  out << "# loragate gates, every rule stated (configs/gates.yaml explains the defaults)\n";
  out << "bootstrap:\n  samples: " << bootstrap.samples << "\n  level: " << exact_number(bootstrap.level)
      << "\n  seed: " << bootstrap.seed << "\n";
  out << "latency_floor_ms: " << exact_number(latency_floor_ms) << "\n";
  write_section(out, "adapter", kScenarioMetrics, true, adapter);
  write_section(out, "recorded", kScenarioMetrics, false, recorded);
  write_section(out, "no_adapter", kScenarioMetrics, true, no_adapter);
  write_section(out, "generic", kGenericMetrics, true, generic);
  write_section(out, "latency", kLatencyMetrics, true, latency);
  return out.str();
}

std::string GateConfig::defaults_text() { return defaults().to_yaml(); }

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

std::vector<GateResult> evaluate_gates(const GateConfig& config, const RunResult& run, const RunResult* recorded,
                                       std::vector<std::string>* skipped) {
  Judge judge(config.bootstrap, skipped);
  size_t base_quality_gates = 0;
  auto count_since = [&](size_t before) { base_quality_gates += judge.results().size() - before; };
  const bool want_recorded = section_has_rules(config.recorded);
  if (want_recorded && recorded == nullptr) judge.skip("recorded", "no recorded run given");
  const std::string recorded_name = recorded != nullptr && recorded->id > 0
                                        ? "recorded online (run " + std::to_string(recorded->id) + ")"
                                        : "recorded online";

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
        if (r.name == s.name) previous = find_arm(r, "online");
      }
      if (candidate == nullptr) {
        judge.skip(s.name + " recorded", "no candidate arm");
      } else if (previous == nullptr) {
        judge.skip(s.name + " recorded", "the recorded run has no online arm for this scenario");
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
