// The per-item data a gate judges: the pairing of candidate and reference
// items, one metric's series of each arm (made by the metric table's row,
// gate_table.h), and why a metric cannot be judged on them. Internal to the
// evaluator (judge.cpp, gates.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "evaluator/bootstrap.h"
#include "evaluator/gate_metrics.h"

namespace loragate::eval::gates_detail {

// One arm's per-item (or per-row) values of a metric, and how a draw of
// indices turns them into the metric.
struct ArmSeries {
  Statistic stat = Statistic::kRatio;
  double q = 0.5;           // kQuantile
  std::vector<double> num;  // kRatio: sum(num) / sum(den); kQuantile: the values
  std::vector<double> den;

  double on(const std::vector<uint32_t>& sample) const;
  double on_all() const;    // every index once
  size_t size() const { return num.size(); }
};

// Candidate and reference items with the same id, in candidate order.
using ItemPairs = std::vector<std::pair<const ItemResult*, const ItemResult*>>;
ItemPairs pair_items(const std::vector<ItemResult>& candidate, const std::vector<ItemResult>& reference);

// Why some pairs cannot give this metric: "" when every pair finished, else
// "3 items did not finish (first: candidate item-7: cancelled)"; unfinished
// rows spoil generation metrics, unscored ones NLL metrics.
// `count_word` names them ("items" or "rows").
std::string unfinished_rows(const ItemPairs& pairs, Uses uses, const std::string& count_word);

// A metric's two series on the pairs (the pairs either arm does not count
// left out), or in `missing` why it cannot be judged.
struct MetricSeries {
  ArmSeries candidate, reference;
  std::string missing;
};
MetricSeries build_series(const MetricSpec& spec, const ItemPairs& pairs, bool per_byte);

// The generic set's rows as items (id = row index), so the table's NLL row reads them.
std::vector<ItemResult> generic_rows(const GenericResult& g);

// The named arm of a scenario, or null.
const ArmResult* find_arm(const ScenarioResult& s, const std::string& arm);

// The generic-set result of the named arm, or null.
const GenericResult* find_generic(const RunResult& run, const std::string& arm);

}  // namespace loragate::eval::gates_detail
