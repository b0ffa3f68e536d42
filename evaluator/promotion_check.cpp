// check_promotion: a passing stored run of this pair that still covers what serves.
#include "evaluator/promotion_check.h"

#include <utility>
#include <vector>

#include "evaluator/run_history.h"

namespace loragate::eval {

// The adapter the registry routes `scenario` to on `base`, with its directory and sha256.
Result<AdapterRecord> routed_adapter(Registry& registry, const std::string& scenario, const std::string& base) {
  LG_ASSIGN_OR_RETURN(std::string name, registry.resolve_scenario(scenario, base));
  return registry.get_adapter(name, base);
}

Status check_promotion(Registry& registry, EvaluationStore& store, const PromotionRequirements& required,
                       const ServingBase& serving, const ServingBase& candidate) {
  (void)required;  // bound to the configured suite and gates by issue 20
  const std::string who = "base '" + candidate.name() + "' (" + candidate.sha256().substr(0, 8) +
                          ") against the serving base '" + serving.name() + "' (" + serving.sha256().substr(0, 8) + ")";
  LG_ASSIGN_OR_RETURN(std::optional<EvaluationRecord> pass, store.latest_pass(candidate.sha256(), serving.sha256()));
  if (!pass) {
    return Status::failed_precondition("no passing evaluation of " + who +
                                       ": run one (POST /admin/evaluations, or loragate eval run --url) or "
                                       "promote with force");
  }
  LG_ASSIGN_OR_RETURN(RunResult run, parse_stored(*pass));
  std::vector<std::string> changed;
  for (const ScenarioResult& s : run.scenarios) {
    for (auto [arm, base] : {std::pair<const char*, const ServingBase*>{"online", &serving}, {"candidate", &candidate}}) {
      auto it = s.arms.find(arm);
      if (it == s.arms.end()) continue;
      Result<AdapterRecord> now = routed_adapter(registry, s.name, base->name());
      if (!now.is_ok() || now->sha256 != it->second.adapter_sha256) {
        changed.push_back("scenario '" + s.name + "' on '" + base->name() + "'");
      }
    }
  }
  if (!changed.empty()) {
    std::string list;
    for (const std::string& c : changed) list += (list.empty() ? "" : ", ") + c;
    return Status::failed_precondition("evaluation run " + std::to_string(run.id) + " of " + who +
                                       " passed, but the adapters of " + list +
                                       " changed since; evaluate again or promote with force");
  }
  return Status::ok();
}

}  // namespace loragate::eval
