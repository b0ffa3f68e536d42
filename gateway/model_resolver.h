// ModelResolver: maps a scenario (a tenant use case, named by the
// X-Scenario header or the `scenario` body field) to the adapter that serves
// it. The lead backs it with the SQLite registry; InMemoryModelResolver is
// the simple version for tests and configs without a registry.
//
// resolve_model() then turns a request's `model` and scenario into the
// adapter to run ("" = the base alone), or an OpenAI 404/400.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "common/status.h"
#include "gateway/openai/openai_errors.h"

namespace loragate {

class AdapterCatalog;

class ModelResolver {
 public:
  virtual ~ModelResolver() = default;
  // The adapter serving `scenario` on base generation `base` ("" = the base
  // alone); Status::not_found when the scenario is unknown there. Called from
  // many network threads at once: implementations must be thread-safe.
  virtual Result<std::string> resolve_scenario(const std::string& scenario, const std::string& base) = 0;
  // Whether a request may name `adapter` on base generation `base`, whose
  // adapter cache is `cache` (may be null). By default: `cache` has it.
  virtual bool serves_adapter(const std::string& adapter, const std::string& base, const AdapterCatalog* cache);
};

// The same routes on every base generation.
class InMemoryModelResolver final : public ModelResolver {
 public:
  // Routes `scenario` to `adapter` ("" = the base), replacing any earlier route.
  void set(const std::string& scenario, const std::string& adapter);
  // Returns false when `scenario` was not routed.
  bool remove(const std::string& scenario);
  Result<std::string> resolve_scenario(const std::string& scenario, const std::string& base) override;

 private:
  std::mutex mu_;
  std::map<std::string, std::string> routes_;  // guarded by mu_
};

// What a request asked for, and the adapter chosen for it.
struct ModelChoice {
  std::string adapter;   // "" = the base alone
  std::string scenario;  // "" = none named
};

// `model` may be "", `served_name` or `base_name` (the base alone), or the
// name of an adapter registered on that base (as `resolver` says when given,
// else as `adapters` does). A scenario, when named, picks
// the adapter on that base; a `model` naming a different adapter is then a
// conflict (400). Unknown names give 404 with param "model" or "scenario".
// `resolver` and `adapters` may be null.
std::optional<ApiError> resolve_model(const std::string& model, const std::string& scenario,
                                      const std::string& served_name, const std::string& base_name,
                                      ModelResolver* resolver, const AdapterCatalog* adapters, ModelChoice* choice);

}  // namespace loragate
