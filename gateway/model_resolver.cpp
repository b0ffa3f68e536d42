#include "gateway/model_resolver.h"

#include "adapters/adapter_catalog.h"

namespace loragate {

bool ModelResolver::serves_adapter(const std::string& adapter, const std::string&, const AdapterCatalog* cache) {
  return cache != nullptr && cache->contains(adapter);
}

void InMemoryModelResolver::set(const std::string& scenario, const std::string& adapter) {
  std::lock_guard<std::mutex> lock(mu_);
  routes_[scenario] = adapter;
}

bool InMemoryModelResolver::remove(const std::string& scenario) {
  std::lock_guard<std::mutex> lock(mu_);
  return routes_.erase(scenario) > 0;
}

Result<std::string> InMemoryModelResolver::resolve_scenario(const std::string& scenario, const std::string&) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = routes_.find(scenario);
  if (it == routes_.end()) return Status::not_found("scenario '" + scenario + "' is not routed to any model");
  return it->second;
}

std::optional<ApiError> resolve_model(const std::string& model, const std::string& scenario,
                                      const std::string& served_name, const std::string& base_name,
                                      ModelResolver* resolver, const AdapterCatalog* adapters, ModelChoice* choice) {
  choice->scenario = scenario;
  std::string from_model;
  const bool model_is_base = model.empty() || model == served_name || model == base_name;
  if (!model_is_base) {
    const bool known = resolver != nullptr ? resolver->serves_adapter(model, base_name, adapters)
                                           : adapters != nullptr && adapters->contains(model);
    if (!known) {
      return ApiError{http::status::not_found,
                      "The model '" + model + "' does not exist on base '" + base_name + "' (serving '" +
                          served_name + "' and its adapters; see GET /v1/models)",
                      "model", "model_not_found"};
    }
    from_model = model;
  }
  if (scenario.empty()) {
    choice->adapter = from_model;
    return std::nullopt;
  }
  if (resolver == nullptr) {
    return ApiError{http::status::not_found, "scenario '" + scenario + "' is unknown: no scenario routing is set up",
                    "scenario", "scenario_not_found"};
  }
  Result<std::string> routed = resolver->resolve_scenario(scenario, base_name);
  if (!routed.is_ok()) {
    const bool missing = routed.status().code() == StatusCode::kNotFound;
    return ApiError{missing ? http::status::not_found : http_status_for(routed.status()), routed.status().message(),
                    "scenario", missing ? "scenario_not_found" : ""};
  }
  if (!model_is_base && routed.value() != from_model) {
    return bad_request("model '" + model + "' conflicts with scenario '" + scenario + "', which is served by " +
                           (routed.value().empty() ? std::string("the base model") : "adapter '" + routed.value() + "'"),
                       "model");
  }
  choice->adapter = routed.value();
  return std::nullopt;
}

}  // namespace loragate
