// The judge: intervals by method, verdicts against bounds, and the why lines.
#include "evaluator/judge.h"

#include <cmath>
#include <utility>

#include "evaluator/proportion_interval.h"

namespace loragate::eval::gates_detail {
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

// The method's name in a why line: "95% Wilson CI".
const char* method_word(const std::string& method) {
  if (method == "wilson") return "Wilson";
  if (method == "newcombe") return "Newcombe";
  if (method == "exact_binomial") return "exact";
  return "bootstrap";
}

// --- intervals ------------------------------------------------------------------------

double sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

// The 2x2 table of 0/1 series (candidate first).
PairedCounts paired_counts(const ArmSeries& candidate, const ArmSeries& reference) {
  PairedCounts t;
  for (size_t i = 0; i < candidate.size(); ++i) {
    const bool c = candidate.num[i] != 0, r = reference.num[i] != 0;
    (c && r ? t.both : c ? t.first_only : r ? t.second_only : t.neither) += 1;
  }
  return t;
}

void set_interval(GateResult& g, const Interval& iv) {
  g.estimate = iv.estimate;
  g.low = iv.low;
  g.high = iv.high;
}

}  // namespace

Judge::Judge(const BootstrapOptions& options)
    : options_(options), level_(format_number("%g", 100.0 * options.level) + "%") {}

GateResult Judge::header(const Comparison& c, const std::string& rule, size_t n) const {
  GateResult g;
  g.scenario = c.scenario;
  g.metric = c.metric;
  g.against = rule == "floor" || rule == "ceiling" ? "absolute" : c.against;
  g.rule = rule;
  g.unit = c.unit;
  g.n = static_cast<int64_t>(n);
  g.optional = c.optional;
  g.estimate = g.low = g.high = kNoEstimate;
  for (const RuleKey& r : kRules) {
    if (rule == r.name && (c.gate.*r.value).has_value()) g.margin = *(c.gate.*r.value);
  }
  return g;
}

// "" when n items are enough; else why not. A quantile q needs q^n below the
// interval's tail for the largest item to bound it at all.
std::string Judge::too_few(const Comparison& c, size_t n) const {
  if (static_cast<int64_t>(n) < c.min_items) {
    return std::to_string(n) + " " + c.count_word + ", fewer than min_items " + std::to_string(c.min_items);
  }
  if (c.spec->stat == Statistic::kQuantile && c.spec->q < 1) {
    const double tail = (1 - options_.level) / 2;
    const auto need = static_cast<size_t>(std::ceil(std::log(tail) / std::log(c.spec->q)));
    if (n < need) {
      return "a p" + format_number("%g", 100 * c.spec->q) + " needs at least " + std::to_string(need) + " " +
             c.count_word + " for a " + level_ + " interval, got " + std::to_string(n);
    }
  }
  return "";
}

void Judge::unjudged(const Comparison& c, Verdict verdict, const std::string& why) {
  for (const std::string& rule : set_rules(c.gate)) {
    GateResult g = header(c, rule, 0);
    g.verdict = verdict;
    g.why = why;
    results_.push_back(std::move(g));
  }
}

void Judge::judge(const Comparison& c, const ArmSeries& candidate, const ArmSeries& reference) {
  const size_t n = candidate.size();
  const std::string shortfall = too_few(c, n);
  for (const std::string& rule : set_rules(c.gate)) {
    GateResult g = header(c, rule, n);
    if (rule == "floor" || rule == "ceiling") {
      absolute(c, rule, candidate, g);
    } else if (rule == "max_drop" || rule == "max_rise") {
      difference(c, rule, candidate, reference, g);
    } else if (rule == "max_rise_rel") {
      relative(c, candidate, reference, g);
    } else {
      flips(c, candidate, reference, g);
    }
    // Too few items cannot show a pass, but an interval wholly past the bound
    // is a measured failure at any n: it stays one (a 2x slower candidate on
    // 12 items fails its latency gate, it is not "inconclusive").
    if (!shortfall.empty() && g.verdict == Verdict::kFail) {
      g.why += " (on " + shortfall + ")";
    } else if (!shortfall.empty() && g.verdict != Verdict::kSkipped) {
      g.verdict = Verdict::kInconclusive;
      g.why += "; inconclusive: " + shortfall;
    }
    results_.push_back(std::move(g));
  }
}

// A floor or ceiling on the candidate's own value.
void Judge::absolute(const Comparison& c, const std::string& rule, const ArmSeries& candidate, GateResult& g) {
  const bool lower = rule == "floor";
  const size_t n = candidate.size();
  if (c.spec->method == Method::kProportion) {
    g.method = "wilson";
    set_interval(g, wilson_interval(static_cast<int64_t>(sum(candidate.num)), static_cast<int64_t>(n), options_.level));
  } else {
    g.method = "paired_bootstrap";
    set_interval(g, paired_bootstrap(n, [&](const std::vector<uint32_t>& s) { return candidate.on(s); }, options_));
  }
  const Interval iv{g.estimate, g.low, g.high};
  g.verdict = lower ? judge_at_least(iv, g.margin) : judge_at_most(iv, g.margin);
  g.why = c.what + " " + format_value(c.spec->format, g.estimate) + " (" + level_ + " " + method_word(g.method) +
          " CI " + format_value(c.spec->format, g.low) + ".." + format_value(c.spec->format, g.high) + ", " +
          std::to_string(n) + " " + c.count_word + ") " + phrase(g.verdict, lower, true) + " " + rule + " " +
          format_margin(c.spec->format, rule, g.margin);
}

// A margin on candidate - reference.
void Judge::difference(const Comparison& c, const std::string& rule, const ArmSeries& candidate,
                       const ArmSeries& reference, GateResult& g) {
  const bool lower = rule == "max_drop";
  const size_t n = candidate.size();
  if (c.spec->method == Method::kProportion) {
    g.method = "newcombe";
    set_interval(g, newcombe_paired_interval(paired_counts(candidate, reference), options_.level));
  } else {
    g.method = "paired_bootstrap";
    set_interval(g, paired_bootstrap(
                        n, [&](const std::vector<uint32_t>& s) { return candidate.on(s) - reference.on(s); }, options_));
  }
  const Interval iv{g.estimate, g.low, g.high};
  g.verdict = lower ? judge_at_least(iv, -g.margin) : judge_at_most(iv, g.margin);
  const Format f = c.spec->format;
  g.why = c.what + " " + format_value(f, candidate.on_all()) + " vs " + c.reference_name + " " +
          format_value(f, reference.on_all()) + " (" + format_difference(f, g.estimate) + ", " + level_ + " " +
          method_word(g.method) + " CI " + format_difference(f, g.low) + ".." + format_difference(f, g.high) + ", " +
          std::to_string(n) + " " + c.count_word + ") " + phrase(g.verdict, lower, false) + " " + rule + " " +
          format_margin(f, rule, g.margin);
}

// candidate / reference - 1; for latency with min_abs_rise_ms, the rise must exceed both bounds.
void Judge::relative(const Comparison& c, const ArmSeries& candidate, const ArmSeries& reference, GateResult& g) {
  const Format f = c.spec->format;
  const double ref = reference.on_all();
  if (!(ref > 0) || !std::isfinite(ref)) {
    g.verdict = Verdict::kSkipped;
    g.why = c.what + " max_rise_rel: " + c.reference_name + " value is " + format_value(f, ref) +
            ", so a relative rise is undefined";
    return;
  }
  const size_t n = candidate.size();
  g.method = "paired_bootstrap";
  set_interval(g, paired_bootstrap(
                      n, [&](const std::vector<uint32_t>& s) { return candidate.on(s) / reference.on(s) - 1.0; },
                      options_));
  std::string abs_part, bound = "max_rise_rel " + format_margin(f, "max_rise_rel", g.margin);
  g.verdict = judge_at_most(Interval{g.estimate, g.low, g.high}, g.margin);
  if (c.gate.min_abs_rise_ms) {
    // The same seed draws the same samples, so the two intervals come from one set of draws.
    const Interval abs = paired_bootstrap(
        n, [&](const std::vector<uint32_t>& s) { return candidate.on(s) - reference.on(s); }, options_);
    const double a = *c.gate.min_abs_rise_ms;
    if (g.high <= g.margin || abs.high <= a) {
      g.verdict = Verdict::kPass;
    } else if (g.low > g.margin && abs.low > a) {
      g.verdict = Verdict::kFail;
    } else {
      g.verdict = Verdict::kInconclusive;
    }
    abs_part = "; " + format_difference(f, abs.estimate) + ", CI " + format_difference(f, abs.low) + ".." +
               format_difference(f, abs.high);
    bound += std::string(g.verdict == Verdict::kPass ? " or " : " and ") + "min_abs_rise_ms " +
             format_margin(Format::kMs, "min_abs_rise_ms", a);
  }
  g.why = c.what + " " + format_value(f, candidate.on_all()) + " vs " + c.reference_name + " " + format_value(f, ref) +
          " (" + format_relative(g.estimate) + ", " + level_ + " bootstrap CI " + format_relative(g.low) + ".." +
          format_relative(g.high) + abs_part + ", " + std::to_string(n) + " " + c.count_word + ") " +
          phrase(g.verdict, false, false) + " " + bound;
}

// Negative flips: items the reference got right and the candidate not, by the
// exact one-sided binomial test of gates.h.
void Judge::flips(const Comparison& c, const ArmSeries& candidate, const ArmSeries& reference, GateResult& g) {
  const PairedCounts t = paired_counts(candidate, reference);
  const int64_t n = t.n(), b = t.second_only, fixes = t.first_only;
  g.method = "exact_binomial";
  set_interval(g, clopper_pearson_interval(b, n, options_.level));
  const double p = binomial_upper_tail(n, b, g.margin);
  if (p < (1 - options_.level) / 2) {
    g.verdict = Verdict::kFail;
  } else if (g.estimate <= g.margin) {
    g.verdict = Verdict::kPass;
  } else {
    g.verdict = Verdict::kInconclusive;
  }
  g.why = "negative flips: " + std::to_string(b) + " of " + std::to_string(n) + " " + c.count_word + " " +
          c.reference_name + " got right and the candidate not (" + format_value(Format::kRate, g.estimate) + ", " +
          level_ + " exact CI " + format_value(Format::kRate, g.low) + ".." + format_value(Format::kRate, g.high) +
          "; " + std::to_string(fixes) + " the other way), P(>= " + std::to_string(b) + " | rate " +
          format_number("%g", g.margin) + ") = " + format_number("%.3g", p) + ": " +
          phrase(g.verdict, false, false) + " max_rate " + format_number("%g", g.margin);
}

}  // namespace loragate::eval::gates_detail
