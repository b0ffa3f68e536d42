// The gates' vocabulary, shared by the config reader (gate_config.cpp), the
// metric table (gate_table.h) and the judge (judge.cpp): how a metric is
// made from items, which rules it accepts, how its numbers are written.
// Internal to the evaluator.
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/gates.h"

namespace loragate::eval::gates_detail {

inline constexpr double kNoEstimate = std::numeric_limits<double>::quiet_NaN();

// How a metric's numbers are written in a `why` line.
enum class Format {
  kRate,    // a fraction in [0, 1]: 0.775, differences +0.050
  kNumber,  // NLL, perplexity: 4 significant digits
  kMs,      // latency in milliseconds
};

// How a sample of items becomes an arm's metric.
enum class Statistic {
  kRatio,     // sum(num) / sum(den): a rate, a mean, a token-weighted NLL
  kExpRatio,  // exp(sum(num) / sum(den)): perplexity
  kQuantile,  // the q-quantile of num: latency
};

// Which interval a metric's rules are judged on (GateResult::method).
enum class Method {
  kProportion,  // 0/1 items: Wilson for floors / ceilings, Newcombe for max_drop
  kBootstrap,   // paired bootstrap
  kFlips,       // negative flips: exact binomial test of the flip count
};

// What a row that did not finish spoils: generated text (ItemResult::unfinished)
// or the reference's score (ItemResult::unscored).
enum class Uses { kGeneration, kScoring };

// One item's part in a metric: the metric of a sample is sum(num) / sum(den)
// (or the quantile of num); an item not counted (no keyword rule, latency not
// measured, nothing scored) leaves the pair out of both arms.
struct ItemValue {
  double num = 0;
  double den = 1;
  bool counted = true;
};
using ItemValueFn = ItemValue (*)(const ItemResult& item, bool per_byte);

// One row of the metric table: everything the judge needs to know about a metric.
struct MetricSpec {
  const char* name;
  bool higher_better;
  Format format;
  Method method;
  Statistic stat;
  double q;                // kQuantile
  Uses uses;
  ItemValueFn value;
  const char* when_none;   // why it cannot be judged when no pair counts
  bool zero_is_missing;    // 0 on every item of both arms means "not computed"
  bool nll;                // in nats per token or per byte (GateResult::unit)
  bool adapter_only;       // only the adapter section takes it
};

template <typename Gates>
struct MetricKey {
  MetricGate Gates::*gate;
  MetricSpec spec;
};

// The rules with a bound, in the order they are judged and written.
struct RuleKey {
  const char* name;
  std::optional<double> MetricGate::*value;
};
inline constexpr RuleKey kRules[] = {{"floor", &MetricGate::floor},       {"ceiling", &MetricGate::ceiling},
                                     {"max_drop", &MetricGate::max_drop}, {"max_rise", &MetricGate::max_rise},
                                     {"max_rise_rel", &MetricGate::max_rise_rel},
                                     {"min_abs_rise_ms", &MetricGate::min_abs_rise_ms},
                                     {"max_rate", &MetricGate::max_rate}};

// The bound rules a metric accepts: by kind and direction, without the
// absolute bounds where the section compares against a reference only (recorded).
std::vector<std::string> accepted_rules(const MetricSpec& spec, bool absolute);

// The rules `gate` sets that produce a gate (min_abs_rise_ms modifies max_rise_rel).
std::vector<std::string> set_rules(const MetricGate& gate);

// printf of one number.
std::string format_number(const char* format, double v);
// "a, b, c".
std::string join(const std::vector<std::string>& names);

}  // namespace loragate::eval::gates_detail
