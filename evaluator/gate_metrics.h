// The gates' vocabulary, shared by the config reader (gate_config.cpp) and the
// judge (gates.cpp): which metrics each section knows, which rules a metric
// accepts, how its numbers are written. Internal to the evaluator.
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/gates.h"

namespace loragate::eval::gates_detail {

inline constexpr double kNoEstimate = std::numeric_limits<double>::quiet_NaN();

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

inline constexpr MetricKey<ScenarioGates> kScenarioMetrics[] = {
    {"keyword_rate", &ScenarioGates::keyword_rate, true, Format::kRate},
    {"exact_match_rate", &ScenarioGates::exact_match_rate, true, Format::kRate},
    {"rougeL_f1", &ScenarioGates::rougeL_f1, true, Format::kRate},
    {"token_f1", &ScenarioGates::token_f1, true, Format::kRate},
    {"nll_mean", &ScenarioGates::nll_mean, false, Format::kNumber},
    {"perplexity", &ScenarioGates::perplexity, false, Format::kNumber},
};

inline constexpr MetricKey<GenericGates> kGenericMetrics[] = {
    {"nll_mean", &GenericGates::nll_mean, false, Format::kNumber},
    {"perplexity", &GenericGates::perplexity, false, Format::kNumber},
};

inline constexpr MetricKey<LatencyGates> kLatencyMetrics[] = {
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
inline constexpr LatencySource kLatencySources[] = {
    {&ItemResult::ttft_ms, 0.50}, {&ItemResult::ttft_ms, 0.99},
    {&ItemResult::tpot_ms, 0.50}, {&ItemResult::tpot_ms, 0.99}};

struct RuleKey {
  const char* name;
  std::optional<double> MetricGate::*value;
};
inline constexpr RuleKey kRules[] = {{"floor", &MetricGate::floor},
                              {"ceiling", &MetricGate::ceiling},
                              {"max_drop", &MetricGate::max_drop},
                              {"max_rise", &MetricGate::max_rise},
                              {"max_rise_rel", &MetricGate::max_rise_rel}};

// The rules a metric accepts: by direction, and without the absolute bounds
// where the section compares against a reference only (recorded).
std::vector<std::string> accepted_rules(bool higher_better, bool absolute);

// True when any metric of the section has a rule set.
bool section_has_rules(const ScenarioGates& g);
bool section_has_rules(const GenericGates& g);
bool section_has_rules(const LatencyGates& g);

// printf of one number.
std::string format_number(const char* format, double v);
// "a, b, c".
std::string join(const std::vector<std::string>& names);

}  // namespace loragate::eval::gates_detail
