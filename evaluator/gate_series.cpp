// The per-item data a gate judges: pairing items, building series, finding arms.
#include "evaluator/gate_series.h"

#include <cmath>
#include <map>
#include <numeric>

namespace loragate::eval::gates_detail {

double ArmSeries::on(const std::vector<uint32_t>& sample) const {
  switch (stat) {
    case Statistic::kRatio: return sample_ratio(num, den, sample);
    case Statistic::kExpRatio: return std::exp(sample_ratio(num, den, sample));
    case Statistic::kQuantile: return sample_quantile(num, sample, q);
  }
  return kNoEstimate;
}

double ArmSeries::on_all() const {
  std::vector<uint32_t> all(num.size());
  std::iota(all.begin(), all.end(), 0u);
  return on(all);
}

ItemPairs pair_items(const std::vector<ItemResult>& candidate, const std::vector<ItemResult>& reference) {
  std::map<std::string, const ItemResult*> by_id;
  for (const ItemResult& r : reference) by_id.emplace(r.id, &r);
  ItemPairs pairs;
  for (const ItemResult& c : candidate) {
    auto it = by_id.find(c.id);
    if (it != by_id.end()) pairs.emplace_back(&c, it->second);
  }
  return pairs;
}

std::string unfinished_rows(const ItemPairs& pairs, Uses uses, const std::string& count_word) {
  const auto reason = [uses](const ItemResult& it) -> const std::string& {
    return uses == Uses::kGeneration ? it.unfinished : it.unscored;
  };
  size_t count = 0;
  std::string first;
  for (const auto& [candidate, reference] : pairs) {
    const std::string& c = reason(*candidate);
    const std::string& r = reason(*reference);
    if (c.empty() && r.empty()) continue;
    if (count++ == 0) first = c.empty() ? "reference " + reference->id + ": " + r : "candidate " + candidate->id + ": " + c;
  }
  if (count == 0) return "";
  const std::string one = count_word.substr(0, count_word.size() - 1);  // "items" -> "item"
  return std::to_string(count) + " " + (count == 1 ? one : count_word) +
         (uses == Uses::kGeneration ? " did not finish" : count == 1 ? " was not scored in full" : " were not scored in full") + " (first: " + first + ")";
}

MetricSeries build_series(const MetricSpec& spec, const ItemPairs& pairs, bool per_byte) {
  MetricSeries s;
  s.candidate.stat = s.reference.stat = spec.stat;
  s.candidate.q = s.reference.q = spec.q;
  if (pairs.empty()) {
    s.missing = "no items in common";
    return s;
  }
  bool any_nonzero = false, bytes_missing = false;
  for (const auto& [candidate, reference] : pairs) {
    const ItemValue c = spec.value(*candidate, per_byte);
    const ItemValue r = spec.value(*reference, per_byte);
    if (!c.counted || !r.counted) continue;
    bytes_missing = bytes_missing || (spec.nll && per_byte && (c.den <= 0 || r.den <= 0));
    any_nonzero = any_nonzero || c.num != 0 || r.num != 0;
    s.candidate.num.push_back(c.num);
    s.candidate.den.push_back(c.den);
    s.reference.num.push_back(r.num);
    s.reference.den.push_back(r.den);
  }
  if (s.candidate.num.empty()) {
    s.missing = spec.when_none;
  } else if (bytes_missing) {
    s.missing = "reference bytes not recorded, and nats per byte need them";
  } else if (spec.zero_is_missing && !any_nonzero) {
    s.missing = "0 on every item of both arms (not computed)";
  }
  return s;
}

std::vector<ItemResult> generic_rows(const GenericResult& g) {
  std::vector<ItemResult> rows(g.row_nll_sum.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].id = std::to_string(i);
    rows[i].nll_sum = g.row_nll_sum[i];
    rows[i].n_ref_tokens = i < g.row_tokens.size() ? g.row_tokens[i] : 0;
    rows[i].reference_bytes = i < g.row_bytes.size() ? g.row_bytes[i] : 0;
  }
  return rows;
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

}  // namespace loragate::eval::gates_detail
