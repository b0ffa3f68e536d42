// AdminApi: the operator routes, behind a bearer token.
//
//   POST   /admin/adapters {name, path}     validate by loading, register, ready at once
//   DELETE /admin/adapters/{name}           refuse new requests now; running ones finish
//   GET    /admin/adapters                  state, rank, size, cache tier, request counts
//   PUT    /admin/scenarios/{name} {adapter}
//   DELETE /admin/scenarios/{name}
//   GET    /admin/scenarios
//   POST   /v1/load_lora_adapter {lora_name, lora_path}     vLLM-compatible aliases
//   POST   /v1/unload_lora_adapter {lora_name}
//
// Writes go to the registry (SQLite) and the engine's adapter cache: the
// registry is the record restored at start, the cache what serves. Paths
// must resolve (symlinks followed) inside a configured adapter root.
// Handlers run on network threads; the registry and cache are thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "adapters/adapter_cache.h"
#include "gateway/metrics.h"
#include "gateway/router.h"
#include "registry/registry.h"

namespace loragate {

struct AdminOptions {
  std::string token;                       // "" = admin routes answer 403
  std::vector<std::string> adapter_roots;  // registered paths must lie inside one
  std::string base_model;                  // the registry name of the base served
};

class AdminApi {
 public:
  AdminApi(AdminOptions options, Registry* registry, AdapterCache* cache, const Metrics* metrics);
  // Adds the admin routes to `router`.
  void install(Router& router);

  // Registers an adapter in registry and cache (validating by loading it).
  // Also used at start for configured preloads. Returns the stored record.
  Result<AdapterRecord> register_adapter(const std::string& name, const std::string& path);
  // Refuses new requests for the adapter and forgets its registration.
  Status unregister_adapter(const std::string& name);

  // Checks "Authorization: Bearer <token>" in constant time. Returns the
  // error response to send, or nullopt when the caller may proceed.
  std::optional<HttpResponse> check_auth(const HttpRequest& request) const;

 private:
  Result<std::string> resolve_inside_roots(const std::string& path) const;

  AdminOptions options_;
  Registry* registry_;
  AdapterCache* cache_;
  const Metrics* metrics_;
};

}  // namespace loragate
