// RegistryModelResolver: resolves scenarios through the SQLite registry, on
// the base generation a request runs on. Thread-safe (the registry
// serialises calls).
#pragma once

#include <string>

#include "gateway/model_resolver.h"
#include "registry/registry.h"

namespace loragate {

class RegistryModelResolver final : public ModelResolver {
 public:
  explicit RegistryModelResolver(Registry* registry) : registry_(registry) {}
  Result<std::string> resolve_scenario(const std::string& scenario, const std::string& base) override {
    return registry_->resolve_scenario(scenario, base);
  }

 private:
  Registry* registry_;
};

}  // namespace loragate
