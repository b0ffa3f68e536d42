#include "gateway/admin/admin_api.h"

#include <iostream>

namespace loragate {

AdminApi::AdminApi(AdminOptions options, Registry* registry, BaseSet* bases, const Metrics* metrics,
                   eval::EvaluationJobs* jobs, EvaluationStore* evaluations)
    : options_(std::move(options)),
      registry_(registry),
      bases_(bases),
      metrics_(metrics),
      jobs_(jobs),
      evaluations_(evaluations) {}

void AdminApi::install(Router& router, BlockingWork& blocking) {
  const AdminGate gate(options_.token, &blocking);
  install_adapters(router, gate);
  install_scenarios(router, gate);
  install_bases(router, gate);
  if (jobs_ != nullptr && evaluations_ != nullptr) install_evaluations(router, gate);
  if (upgrades_ != nullptr) install_upgrades(router, gate);
  install_fleet(router, gate);
  install_prefix_cache(router, gate);
}

eval::UpgradeHooks AdminApi::upgrade_hooks() {
  eval::UpgradeHooks hooks;
  hooks.register_adapter = [this](const std::string& name, const std::string& dir, const std::string& base) {
    return register_adapter_at(name, dir, base);
  };
  hooks.unregister_adapter = [this](const std::string& name, const std::string& base) {
    return unregister_adapter(name, base);
  };
  hooks.routes_changed = [this] { routes_changed(); };
  hooks.promote = [this](const std::string& candidate, const std::string& actor) {
    if (rollout_ != nullptr) return rollout_->promote(candidate, /*force=*/false, actor).status();
    return bases_->promote(candidate, /*force=*/false, actor).status();
  };
  return hooks;
}

Result<std::shared_ptr<ServingBase>> AdminApi::base_named(const std::string& name) const {
  if (!name.empty()) return bases_->find(name);
  std::shared_ptr<ServingBase> serving = bases_->serving();
  if (serving == nullptr) return Status::failed_precondition("no base model is serving yet");
  return serving;
}

Status AdminApi::check_not_a_base_name(const std::string& name) const {
  bool taken = name == options_.served_name;
  for (const BaseStatus& b : bases_->list()) taken = taken || b.name == name;
  if (!taken) return Status::ok();
  return Status::already_exists("adapter name '" + name + "' is the name of a base model: requests naming it "
                                "reach the base; choose another name");
}

// After every write, whatever its outcome: the routes in memory follow the registry.
void AdminApi::routes_changed() {
  if (routes_ == nullptr) return;
  if (Status s = routes_->reload(); !s.is_ok()) {
    std::cerr << "loragate: routes not reloaded after an admin write (the previous ones still apply): "
              << s.to_string() << "\n";
  }
}

}  // namespace loragate
