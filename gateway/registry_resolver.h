// RegistryModelResolver: resolves scenarios through the SQLite registry for
// the base model now served. Thread-safe (the registry serialises calls).
#pragma once

#include <string>

#include "gateway/model_resolver.h"
#include "registry/registry.h"

namespace loragate {

class RegistryModelResolver final : public ModelResolver {
 public:
  RegistryModelResolver(Registry* registry, std::string base_model)
      : registry_(registry), base_model_(std::move(base_model)) {}
  Result<std::string> resolve_scenario(const std::string& scenario) override {
    return registry_->resolve_scenario(scenario, base_model_);
  }

 private:
  Registry* registry_;
  std::string base_model_;
};

}  // namespace loragate
