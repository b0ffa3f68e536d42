#include "gateway/registry_resolver.h"

namespace loragate {

Result<std::string> RegistryModelResolver::resolve_scenario(const std::string& scenario, const std::string& base) {
  Key key{scenario, base};
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = routes_.find(key);
    if (it != routes_.end()) {
      if (!it->second.found) return Status::not_found(it->second.missing);
      return it->second.adapter;
    }
    generation = generation_;
  }
  registry_lookups_.fetch_add(1);
  Result<std::string> looked_up = registry_->resolve_scenario(scenario, base);
  const bool missing = !looked_up.is_ok() && looked_up.status().code() == StatusCode::kNotFound;
  if (!looked_up.is_ok() && !missing) return looked_up;  // the storage failed: ask again next time
  Route route;
  route.found = !missing;
  if (missing) {
    route.missing = looked_up.status().message();
  } else {
    route.adapter = looked_up.value();
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (generation != generation_) return looked_up;  // a write committed meanwhile: this may be stale
  if (routes_.size() >= max_routes_) routes_.clear();
  routes_.emplace(std::move(key), std::move(route));
  return looked_up;
}

void RegistryModelResolver::invalidate() {
  std::lock_guard<std::mutex> lock(mu_);
  routes_.clear();
  ++generation_;
}

}  // namespace loragate
