// RegistryModelResolver: resolves scenarios through the SQLite registry, on
// the base generation a request runs on, and keeps every answer (unknown
// scenarios included) in memory: a request that finds its route there does
// not wait for the registry's lock, nor for SQLite's busy timeout.
//
// The server is the registry's only writer, and every admin write that can
// change a route (adapter add/remove, scenario set/delete, base add, remove,
// promote and rollback) calls invalidate() after it committed. Anything else
// that writes scenarios while requests resolve must call it too.
//
// Thread-safe. A lookup that raced with a write does not store its answer:
// a generation count, bumped by invalidate(), tells it the answer may be stale.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "gateway/model_resolver.h"
#include "registry/registry.h"

namespace loragate {

class RegistryModelResolver final : public ModelResolver {
 public:
  // `max_routes` bounds the cache: unknown scenario names come from clients.
  explicit RegistryModelResolver(Registry* registry, size_t max_routes = 4096)
      : registry_(registry), max_routes_(max_routes) {}
  Result<std::string> resolve_scenario(const std::string& scenario, const std::string& base) override;

  // Forgets every cached route: the next lookups read the registry.
  void invalidate();
  // How many lookups went to the registry (a cache miss each).
  uint64_t registry_lookups() const { return registry_lookups_.load(); }

 private:
  using Key = std::pair<std::string, std::string>;  // (scenario, base)
  struct Route {
    std::string adapter;  // "" with not_found
    bool found = false;
    std::string missing;  // the registry's not_found message
  };

  Registry* registry_;
  const size_t max_routes_;
  std::atomic<uint64_t> registry_lookups_{0};
  std::mutex mu_;
  std::map<Key, Route> routes_;  // guarded by mu_
  uint64_t generation_ = 0;      // guarded by mu_; bumped by invalidate()
};

}  // namespace loragate
