// The gates' vocabulary: the rules each metric accepts, and small formatting helpers.
#include "evaluator/gate_metrics.h"

#include <cstdio>

namespace loragate::eval::gates_detail {

std::vector<std::string> accepted_rules(const MetricSpec& spec, bool absolute) {
  if (spec.method == Method::kFlips) return {"max_rate"};
  std::vector<std::string> rules;
  if (spec.higher_better) {
    if (absolute) rules.push_back("floor");
    rules.push_back("max_drop");
  } else {
    if (absolute) rules.push_back("ceiling");
    rules.push_back("max_rise");
    rules.push_back("max_rise_rel");
    if (spec.format == Format::kMs) rules.push_back("min_abs_rise_ms");
  }
  return rules;
}

std::vector<std::string> set_rules(const MetricGate& gate) {
  std::vector<std::string> rules;
  for (const RuleKey& r : kRules) {
    if ((gate.*r.value).has_value() && std::string(r.name) != "min_abs_rise_ms") rules.push_back(r.name);
  }
  return rules;
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
