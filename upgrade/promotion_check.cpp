// promotion_blockers: the run a promotion is judged on, and every condition it does not meet.
#include "upgrade/promotion_check.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "common/sha256.h"
#include "evaluator/gates.h"
#include "evaluator/run_history.h"
#include "evaluator/suite.h"

namespace loragate::eval {
namespace {

std::string short_sha(const std::string& sha256) { return sha256.empty() ? "-" : sha256.substr(0, 8); }

std::string named(const std::string& base, const std::string& sha256) {
  return "'" + base + "' (" + short_sha(sha256) + ")";
}

std::string gates_hash(const GateConfig& gates) { return sha256_hex(gates.to_yaml()); }

bool same_pair(const EvaluationRecord& r, const BaseIdentity& serving, const BaseIdentity& candidate) {
  return r.online_sha256 == serving.sha256 && r.candidate_sha256 == candidate.sha256;
}

// (d): what the run ran against what the server is configured with; one line each that differs.
std::vector<std::string> unmet_configuration(const EvaluationRecord& r, const PromotionRequirements& required,
                                             const std::string& required_gates) {
  std::vector<std::string> out;
  if (!required.suite_sha256.empty() && r.suite_sha256 != required.suite_sha256) {
    out.push_back("its suite (" + short_sha(r.suite_sha256) + ") is not the configured evaluation.suite " +
                  required.suite_path + " (" + short_sha(required.suite_sha256) + ")");
  }
  if (r.gates_sha256 != required_gates) {
    out.push_back("its gates (" + short_sha(r.gates_sha256) + ") are not " +
                  (required.gates_path.empty() ? "the default gates (evaluation.gates is not set)"
                                               : "the configured evaluation.gates " + required.gates_path) +
                  " (" + short_sha(required_gates) + ")");
  }
  return out;
}

// The passing run to judge: the best tier first, the newest within it (rows come newest first).
std::optional<EvaluationRecord> run_to_judge(const std::vector<EvaluationRecord>& runs,
                                             const PromotionRequirements& required, const std::string& required_gates,
                                             const BaseIdentity& serving, const BaseIdentity& candidate) {
  auto tier = [&](const EvaluationRecord& r) {
    if (same_pair(r, serving, candidate)) return unmet_configuration(r, required, required_gates).empty() ? 0 : 1;
    return r.candidate_sha256 == candidate.sha256 ? 2 : 3;
  };
  std::optional<EvaluationRecord> best;
  for (const EvaluationRecord& r : runs) {
    if (r.verdict != "pass") continue;
    if (!best || tier(r) < tier(*best)) best = r;
  }
  return best;
}

// (c): every scenario routed on the serving base now, in the run with the adapters routed now on both bases.
Result<std::vector<std::string>> unmet_coverage(Registry& registry, const RunResult& run, const BaseIdentity& serving,
                                                const BaseIdentity& candidate) {
  std::vector<std::string> out;
  LG_ASSIGN_OR_RETURN(std::vector<ScenarioRecord> routed, registry.list_scenarios(serving.name));
  for (const ScenarioRecord& scenario : routed) {
    const std::string& name = scenario.name;
    auto in_run = std::find_if(run.scenarios.begin(), run.scenarios.end(),
                               [&](const ScenarioResult& s) { return s.name == name; });
    if (in_run == run.scenarios.end()) {
      out.push_back("scenario '" + name + "', routed on '" + serving.name + "', is not in the run");
      continue;
    }
    for (auto [arm, base] : {std::pair<const char*, const BaseIdentity*>{"online", &serving}, {"candidate", &candidate}}) {
      Result<AdapterRecord> now = routed_adapter(registry, name, base->name);
      if (!now.is_ok()) {
        if (now.status().code() != StatusCode::kNotFound) return now.status();
        out.push_back("scenario '" + name + "' is routed on '" + serving.name + "' but not on '" + base->name + "'");
        continue;
      }
      auto it = in_run->arms.find(arm);
      const std::string ran = it == in_run->arms.end() ? "" : it->second.adapter_sha256;
      if (ran != now->sha256) {
        out.push_back("scenario '" + name + "' on '" + base->name + "' ran " +
                      (ran.empty() ? std::string("no adapter") : "adapter " + short_sha(ran)) + ", but '" +
                      base->name + "' routes it to '" + now->name + "' (" + short_sha(now->sha256) +
                      ") now: changed since");
      }
    }
  }
  return out;
}

}  // namespace

// The adapter the registry routes `scenario` to on `base`, with its directory and sha256.
Result<AdapterRecord> routed_adapter(Registry& registry, const std::string& scenario, const std::string& base) {
  LG_ASSIGN_OR_RETURN(std::string name, registry.resolve_scenario(scenario, base));
  return registry.get_adapter(name, base);
}

Result<PromotionRequirements> load_promotion_requirements(const std::string& suite_path,
                                                          const std::string& gates_path) {
  PromotionRequirements required;
  if (!suite_path.empty()) {
    Result<Suite> suite = load_suite(suite_path);
    if (!suite.is_ok()) return suite.status().with_context("evaluation.suite");
    required.suite_sha256 = suite_sha256(*suite);
    required.suite_path = suite_path;
  }
  if (!gates_path.empty()) {
    Result<GateConfig> gates = GateConfig::load(gates_path);
    if (!gates.is_ok()) return gates.status().with_context("evaluation.gates");
    required.gates_sha256 = gates_hash(*gates);
    required.gates_path = gates_path;
  }
  return required;
}

Result<std::vector<std::string>> promotion_blockers(Registry& registry, EvaluationStore& store,
                                                    const PromotionRequirements& required,
                                                    const BaseIdentity& serving, const BaseIdentity& candidate) {
  const std::string required_gates =
      required.gates_sha256.empty() ? gates_hash(GateConfig::defaults()) : required.gates_sha256;
  LG_ASSIGN_OR_RETURN(std::vector<EvaluationRecord> runs, store.runs_of_candidate(candidate.sha256, candidate.name));
  const std::optional<EvaluationRecord> chosen = run_to_judge(runs, required, required_gates, serving, candidate);
  if (!chosen) {
    return std::vector<std::string>{"no passing evaluation of " + named(candidate.name, candidate.sha256) +
                                    " against the serving base " + named(serving.name, serving.sha256) +
                                    ": run one (POST /admin/evaluations, or loragate eval run --url)"};
  }
  std::vector<std::string> unmet;
  if (chosen->online_sha256 != serving.sha256) {  // (a)
    unmet.push_back("its online base " + named(chosen->online_base, chosen->online_sha256) +
                    " is not the serving base " + named(serving.name, serving.sha256));
  }
  if (chosen->candidate_sha256 != candidate.sha256) {  // (b)
    unmet.push_back("its candidate " + named(chosen->candidate_base, chosen->candidate_sha256) +
                    " is not the promoted base " + named(candidate.name, candidate.sha256));
  }
  LG_ASSIGN_OR_RETURN(EvaluationRecord whole, store.get(chosen->id));
  LG_ASSIGN_OR_RETURN(RunResult run, parse_stored(whole));
  LG_ASSIGN_OR_RETURN(std::vector<std::string> coverage, unmet_coverage(registry, run, serving, candidate));  // (c)
  unmet.insert(unmet.end(), coverage.begin(), coverage.end());
  for (std::string& line : unmet_configuration(*chosen, required, required_gates)) unmet.push_back(std::move(line));  // (d)
  const std::string prefix = "evaluation run " + std::to_string(chosen->id) + ": ";
  for (std::string& line : unmet) line = prefix + line;
  for (const EvaluationRecord& r : runs) {  // (e): newest first, so the newer ones come before it
    if (r.id <= chosen->id) break;
    if (same_pair(r, serving, candidate) && r.verdict == "fail") {
      unmet.push_back("evaluation run " + std::to_string(r.id) + " of the same pair, newer than run " +
                      std::to_string(chosen->id) + ", failed");
    }
  }
  return unmet;
}

}  // namespace loragate::eval
