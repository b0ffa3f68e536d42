// The metric table: one row per gated metric, saying how each arm's per-item
// series is made from ItemResult (generic rows are read as items too), its
// direction, format and interval method. A new metric is one row here plus
// its MetricGate in gates.h. Internal to the evaluator.
#pragma once

#include "evaluator/gate_metrics.h"

namespace loragate::eval::gates_detail {

// The per-item values of the table's metrics (gate_table.cpp).
ItemValue keyword_value(const ItemResult& it, bool per_byte);
ItemValue exact_match_value(const ItemResult& it, bool per_byte);
ItemValue rouge_value(const ItemResult& it, bool per_byte);
ItemValue token_f1_value(const ItemResult& it, bool per_byte);
ItemValue nll_value(const ItemResult& it, bool per_byte);
ItemValue right_value(const ItemResult& it, bool per_byte);
ItemValue ttft_value(const ItemResult& it, bool per_byte);
ItemValue tpot_value(const ItemResult& it, bool per_byte);

// "Right" as ArmMetrics::negative_flips counts it: keyword == 1 for an item
// with a keyword rule, else exact_match == 1.
bool item_right(const ItemResult& it);

using S = Statistic;
using M = Method;
using U = Uses;
using F = Format;

// clang-format off
inline constexpr MetricKey<ScenarioGates> kScenarioMetrics[] = {
    {&ScenarioGates::keyword_rate, {"keyword_rate", true, F::kRate, M::kProportion, S::kRatio, 0, U::kGeneration,
                                    keyword_value, "no item has a keyword rule", false, false, false}},
    {&ScenarioGates::exact_match_rate, {"exact_match_rate", true, F::kRate, M::kProportion, S::kRatio, 0,
                                        U::kGeneration, exact_match_value, "no items in common", false, false, false}},
    {&ScenarioGates::rougeL_f1, {"rougeL_f1", true, F::kRate, M::kBootstrap, S::kRatio, 0, U::kGeneration,
                                 rouge_value, "no items in common", true, false, false}},
    {&ScenarioGates::token_f1, {"token_f1", true, F::kRate, M::kBootstrap, S::kRatio, 0, U::kGeneration,
                                token_f1_value, "no items in common", true, false, false}},
    {&ScenarioGates::nll_mean, {"nll_mean", false, F::kNumber, M::kBootstrap, S::kRatio, 0, U::kScoring,
                                nll_value, "no reference tokens scored", false, true, false}},
    {&ScenarioGates::perplexity, {"perplexity", false, F::kNumber, M::kBootstrap, S::kExpRatio, 0, U::kScoring,
                                  nll_value, "no reference tokens scored", false, true, false}},
    {&ScenarioGates::negative_flip_rate, {"negative_flip_rate", false, F::kRate, M::kFlips, S::kRatio, 0,
                                          U::kGeneration, right_value, "no items in common", false, false, true}},
};

inline constexpr MetricKey<GenericGates> kGenericMetrics[] = {
    {&GenericGates::nll_mean, {"nll_mean", false, F::kNumber, M::kBootstrap, S::kRatio, 0, U::kScoring,
                               nll_value, "no generic tokens scored", false, true, false}},
    {&GenericGates::perplexity, {"perplexity", false, F::kNumber, M::kBootstrap, S::kExpRatio, 0, U::kScoring,
                                 nll_value, "no generic tokens scored", false, true, false}},
};

inline constexpr MetricKey<LatencyGates> kLatencyMetrics[] = {
    {&LatencyGates::ttft_p50, {"ttft_p50", false, F::kMs, M::kBootstrap, S::kQuantile, 0.50, U::kGeneration,
                               ttft_value, "no latencies measured (0 on every item)", false, false, false}},
    {&LatencyGates::ttft_p90, {"ttft_p90", false, F::kMs, M::kBootstrap, S::kQuantile, 0.90, U::kGeneration,
                               ttft_value, "no latencies measured (0 on every item)", false, false, false}},
    {&LatencyGates::ttft_p99, {"ttft_p99", false, F::kMs, M::kBootstrap, S::kQuantile, 0.99, U::kGeneration,
                               ttft_value, "no latencies measured (0 on every item)", false, false, false}},
    {&LatencyGates::tpot_p50, {"tpot_p50", false, F::kMs, M::kBootstrap, S::kQuantile, 0.50, U::kGeneration,
                               tpot_value, "no latencies measured (0 on every item)", false, false, false}},
    {&LatencyGates::tpot_p90, {"tpot_p90", false, F::kMs, M::kBootstrap, S::kQuantile, 0.90, U::kGeneration,
                               tpot_value, "no latencies measured (0 on every item)", false, false, false}},
    {&LatencyGates::tpot_p99, {"tpot_p99", false, F::kMs, M::kBootstrap, S::kQuantile, 0.99, U::kGeneration,
                               tpot_value, "no latencies measured (0 on every item)", false, false, false}},
};
// clang-format on

// True when any metric of the section has a rule set.
template <typename Gates, size_t N>
bool section_has_rules(const Gates& g, const MetricKey<Gates> (&table)[N]) {
  for (const auto& m : table) {
    if ((g.*m.gate).any()) return true;
  }
  return false;
}

}  // namespace loragate::eval::gates_detail
