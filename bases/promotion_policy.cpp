#include "bases/promotion_policy.h"

#include <set>

namespace loragate {

std::string joined(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : separator) + s;
  return out;
}

std::vector<std::string> missing_on(Registry* registry, const ServingBase& current, const ServingBase& target) {
  std::vector<std::string> missing;
  std::set<std::string> have;
  for (const AdapterInfo& a : target.adapters()->list()) have.insert(a.name);
  std::set<std::string> needed;
  if (registry != nullptr) {
    if (auto adapters = registry->list_adapters(current.name()); adapters.is_ok()) {
      for (const AdapterRecord& a : *adapters) {
        if (a.state == AdapterState::kReady) needed.insert(a.name);
      }
    }
  } else {
    for (const AdapterInfo& a : current.adapters()->list()) needed.insert(a.name);
  }
  for (const std::string& n : needed) {
    if (!have.count(n)) missing.push_back("adapter '" + n + "'");
  }
  if (registry != nullptr) {
    auto theirs = registry->list_scenarios(target.name());
    auto ours = registry->list_scenarios(current.name());
    std::set<std::string> routed;
    if (theirs.is_ok()) {
      for (const ScenarioRecord& s : *theirs) routed.insert(s.name);
    }
    if (ours.is_ok()) {
      for (const ScenarioRecord& s : *ours) {
        if (!routed.count(s.name)) missing.push_back("scenario '" + s.name + "'");
      }
    }
  }
  return missing;
}

}  // namespace loragate
