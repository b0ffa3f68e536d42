// RegistryModelResolver: the routes of the SQLite registry, held in memory —
// the adapters registered (ready) on each base generation and the scenarios
// of each — so that a request resolves without the registry's lock, SQLite's
// busy timeout or any query, whatever names a client sends: an unknown name
// is refused from memory and can push no real route out.
//
// The server is the registry's only writer, and every admin write that can
// change a route (adapter add/remove, scenario set/delete, base add, remove,
// promote and rollback) calls reload() after it committed: reload() reads the
// registry once, off the network threads, and swaps the whole set of routes
// in. Anything else that writes adapters or scenarios while requests resolve
// must call it too.
//
// Thread-safe. Lookups share an immutable snapshot; reloads are serialised,
// so a later write is never undone by an earlier reload finishing last.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "gateway/model_resolver.h"
#include "registry/registry.h"

namespace loragate {

class RegistryModelResolver final : public ModelResolver {
 public:
  // Reads the routes `registry` holds now; fails when the registry does.
  static Result<std::unique_ptr<RegistryModelResolver>> create(Registry* registry);
  RegistryModelResolver(const RegistryModelResolver&) = delete;
  RegistryModelResolver& operator=(const RegistryModelResolver&) = delete;

  Result<std::string> resolve_scenario(const std::string& scenario, const std::string& base) override;
  // Registered, ready on `base` in the registry, and present in its cache.
  bool serves_adapter(const std::string& adapter, const std::string& base, const AdapterCatalog* cache) override;

  // Reads every route again from the registry and replaces the ones in
  // memory; when the registry fails, the routes in memory stay as they were.
  Status reload();
  // How many times the routes were read from the registry (one per reload).
  uint64_t registry_lookups() const { return registry_lookups_.load(); }

 private:
  struct Routes {
    std::set<std::pair<std::string, std::string>> adapters;                 // (base, adapter), ready ones
    std::map<std::pair<std::string, std::string>, std::string> scenarios;   // (base, scenario) -> adapter
  };
  explicit RegistryModelResolver(Registry* registry) : registry_(registry) {}
  std::shared_ptr<const Routes> routes() const;

  Registry* registry_;
  std::atomic<uint64_t> registry_lookups_{0};
  std::mutex reload_mu_;                  // held through a whole reload
  mutable std::mutex mu_;                 // guards routes_ (the pointer, not what it points at)
  std::shared_ptr<const Routes> routes_;  // never null once created
};

}  // namespace loragate
