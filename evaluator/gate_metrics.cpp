// The gates' vocabulary: the rules each metric accepts, and small formatting helpers.
#include "evaluator/gate_metrics.h"

#include <cstdio>

namespace loragate::eval::gates_detail {

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

}  // namespace loragate::eval::gates_detail
