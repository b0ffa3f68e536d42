#include "gateway/registry_resolver.h"

#include "adapters/adapter_catalog.h"

namespace loragate {

Result<std::unique_ptr<RegistryModelResolver>> RegistryModelResolver::create(Registry* registry) {
  std::unique_ptr<RegistryModelResolver> resolver(new RegistryModelResolver(registry));
  LG_RETURN_IF_ERROR(resolver->reload());
  return resolver;
}

std::shared_ptr<const RegistryModelResolver::Routes> RegistryModelResolver::routes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return routes_;
}

Result<std::string> RegistryModelResolver::resolve_scenario(const std::string& scenario, const std::string& base) {
  const std::shared_ptr<const Routes> routes = this->routes();
  auto it = routes->scenarios.find({base, scenario});
  if (it == routes->scenarios.end()) {
    return Status::not_found("scenario '" + scenario + "' not found on base model '" + base + "'");
  }
  return it->second;
}

bool RegistryModelResolver::serves_adapter(const std::string& adapter, const std::string& base,
                                           const AdapterCatalog* cache) {
  return routes()->adapters.count({base, adapter}) > 0 && cache != nullptr && cache->contains(adapter);
}

Status RegistryModelResolver::reload() {
  std::lock_guard<std::mutex> serialised(reload_mu_);
  registry_lookups_.fetch_add(1);
  auto fresh = std::make_shared<Routes>();
  LG_ASSIGN_OR_RETURN(std::vector<AdapterRecord> adapters, registry_->list_adapters());
  for (const AdapterRecord& a : adapters) {
    if (a.state == AdapterState::kReady) fresh->adapters.emplace(a.base_model, a.name);
  }
  LG_ASSIGN_OR_RETURN(std::vector<ScenarioRecord> scenarios, registry_->list_scenarios());
  for (ScenarioRecord& s : scenarios) fresh->scenarios[{s.base_model, s.name}] = std::move(s.adapter);
  std::lock_guard<std::mutex> lock(mu_);
  routes_ = std::move(fresh);
  return Status::ok();
}

}  // namespace loragate
