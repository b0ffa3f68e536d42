// The per-item data a gate judges: one arm's values of a metric as a series
// that a bootstrap draw turns into the metric, and the pairing of candidate and
// reference items. Internal to the evaluator (gates.cpp).
#pragma once

#include <cmath>
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
ItemPairs pair_items(const ArmResult& candidate, const ArmResult& reference);

// A scenario metric of one side (first = candidate, second = reference) of the pairs.
ArmSeries item_series(const ItemPairs& pairs, bool candidate, const std::string& metric);

// Why a scenario metric cannot be judged on these series; "" when it can.
std::string missing_data(const std::string& metric, const ArmSeries& candidate, const ArmSeries& reference);

// The named arm of a scenario, or null.
const ArmResult* find_arm(const ScenarioResult& s, const std::string& arm);

// The generic-set result of the named arm, or null.
const GenericResult* find_generic(const RunResult& run, const std::string& arm);

}  // namespace loragate::eval::gates_detail
