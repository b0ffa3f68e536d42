// The judge: a metric's paired series and its configured rules in, one
// GateResult per rule out, each with its interval (by the method the metric
// table names), verdict and `why` line. Gates that cannot be judged come out
// with the verdict and reason given. Internal to the evaluator (gates.cpp);
// the rules themselves are described in gates.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "evaluator/gate_series.h"

namespace loragate::eval::gates_detail {

// One metric of one section on one scenario: what is compared, and the words for its lines.
struct Comparison {
  std::string scenario;        // GateResult::scenario
  std::string metric;          // GateResult::metric ("no_adapter.perplexity")
  std::string against;         // "online" or "recorded"
  std::string what;            // "candidate perplexity without adapters"
  std::string reference_name;  // "online", "recorded candidate (run 7)"
  std::string count_word;      // "items" or "rows"
  std::string unit;            // GateResult::unit: "nats/token", "nats/byte", "ms" or ""
  const MetricSpec* spec = nullptr;
  MetricGate gate;
  bool optional = false;       // the metric's or its section's `optional`
  int64_t min_items = 30;
};

class Judge {
 public:
  explicit Judge(const BootstrapOptions& options);

  // Every rule `c.gate` sets, judged on the paired series.
  void judge(const Comparison& c, const ArmSeries& candidate, const ArmSeries& reference);
  // Every rule `c.gate` sets, not judged: `verdict` (skipped or inconclusive), no estimate, `why` as given.
  void unjudged(const Comparison& c, Verdict verdict, const std::string& why);
  void add(GateResult g) { results_.push_back(std::move(g)); }
  const std::vector<GateResult>& results() const { return results_; }
  std::vector<GateResult> take() { return std::move(results_); }

 private:
  GateResult header(const Comparison& c, const std::string& rule, size_t n) const;
  std::string too_few(const Comparison& c, size_t n) const;
  void absolute(const Comparison& c, const std::string& rule, const ArmSeries& candidate, GateResult& g);
  void difference(const Comparison& c, const std::string& rule, const ArmSeries& candidate,
                  const ArmSeries& reference, GateResult& g);
  void relative(const Comparison& c, const ArmSeries& candidate, const ArmSeries& reference, GateResult& g);
  void flips(const Comparison& c, const ArmSeries& candidate, const ArmSeries& reference, GateResult& g);

  BootstrapOptions options_;
  std::string level_;  // "95%"
  std::vector<GateResult> results_;
};

}  // namespace loragate::eval::gates_detail
