// The per-item data a gate judges: pairing items, building series, finding arms.
#include "evaluator/gate_series.h"

#include <map>

namespace loragate::eval::gates_detail {

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

}  // namespace loragate::eval::gates_detail
