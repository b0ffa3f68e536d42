// AdminApi: the operator routes, behind a bearer token.
//
//   POST   /admin/adapters {name, path, base?}   validate by loading, register on a base, ready at once
//   DELETE /admin/adapters/{name}[?base=B]       refuse new requests now; running ones finish
//   GET    /admin/adapters[?base=B]              state, rank, size, cache tier, request counts
//   PUT    /admin/scenarios/{name} {adapter, base?, train?: {path, config?}}   train: the scenario's training set
//   DELETE /admin/scenarios/{name}[?base=B]
//   GET    /admin/scenarios[/{name}][?base=B]   with each scenario's training set (`train`, null when none)
//   POST   /admin/bases {name, path, dtype?}     load a candidate base in the background (202)
//   GET    /admin/bases                          every base (state, sha256, bytes, adapters, in flight) and recent swaps
//   DELETE /admin/bases/{name}                   unload a base that does not serve
//   POST   /admin/bases/{name}/promote {force?, by?}
//   POST   /admin/bases/rollback {by?}
//   POST   /admin/bases/{name}/shadow {fraction, scenarios?}   copy that share of live requests to it
//   GET    /admin/bases/{name}/shadow            agreement with live and latencies, per scenario
//   POST   /admin/evaluations {candidate, suite, gates?}   evaluate a candidate in the background (202)
//   GET    /admin/evaluations[/{id}]             progress and verdict; stored runs
//   POST   /admin/upgrades {candidate, path, promote?, skip_untrained?, dtype?}   retrain, evaluate, promote (202)
//   GET    /admin/upgrades[/{id}]                each scenario's retraining, the verdict, the report's path
//   DELETE /admin/upgrades/{id} (or POST /admin/upgrades/{id}/cancel)   cancel it (resumable)
//   GET    /admin/fleet                          the replicas sharing the registry (fleet mode) and recent rollouts
//   POST   /admin/prefix_cache/reset [{base?}][?base=B]   drop the cached prompt prefixes of one base, or of
//                                                every loaded base when none is named: {"reset": [names]}
//   POST   /v1/load_lora_adapter {lora_name, lora_path}     vLLM-compatible aliases (serving base)
//   POST   /v1/unload_lora_adapter {lora_name}
//
// `base` defaults to the serving base (the X-Base header also names one).
// Writes go to the registry (SQLite) and the base's adapter cache: the
// registry is the record restored at start, the cache what serves. Adapter
// and base paths must resolve (symlinks followed) inside a configured root.
// Handlers read their request on a network thread; whatever touches the disk
// or the registry (loading and hashing adapters, SQLite reads and writes,
// base loads) runs on the Gateway's BlockingWork, so that no connection
// waits for it (AdminGate: every route checks the token, then hops off the
// strand). The registry, caches and BaseSet are thread-safe. Every write that
// can change a route reloads the routes kept in memory.
//
// One file per resource: admin_adapters.cpp, admin_scenarios.cpp,
// admin_bases.cpp, admin_shadow.cpp, admin_evaluations.cpp, admin_upgrades.cpp,
// admin_fleet.cpp, admin_prefix_cache.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bases/base_set.h"
#include "fleet/fleet_member.h"
#include "fleet/fleet_rollout.h"
#include "gateway/admin/admin_gate.h"
#include "gateway/admin/blocking_work.h"
#include "gateway/http/router.h"
#include "gateway/metrics/metrics.h"
#include "gateway/registry_resolver.h"
#include "gateway/shadow_traffic.h"
#include "registry/registry.h"
#include "upgrade/evaluation_jobs.h"
#include "upgrade/upgrade_job.h"

namespace loragate {

struct AdminOptions {
  std::string token;                       // "" = admin routes answer 403
  std::vector<std::string> adapter_roots;  // registered adapter paths must lie inside one
  std::vector<std::string> base_roots;     // base model paths must lie inside one
  std::vector<std::string> eval_roots;     // suite and gates files of evaluations must lie inside one
  std::string served_name;                 // the serving base's public name: no adapter may take it
  std::vector<std::string> training_roots; // scenarios' training sets must lie inside one (or an adapter root)
};

class AdminApi {
 public:
  // `jobs` and `evaluations` may be null: the evaluation routes then answer 404.
  AdminApi(AdminOptions options, Registry* registry, BaseSet* bases, const Metrics* metrics,
           eval::EvaluationJobs* jobs = nullptr, EvaluationStore* evaluations = nullptr);
  // Adds the admin routes to `router`; their slow work runs on `blocking`
  // (which must outlive every request, as the Gateway's does).
  void install(Router& router, BlockingWork& blocking);
  // Reloaded after every admin write (not owned; null = none). Before install().
  void set_route_cache(RegistryModelResolver* routes) { routes_ = routes; }
  // Enables the shadow routes (not owned). Before install().
  void set_shadow_traffic(ShadowTraffic* shadow) { shadow_ = shadow; }
  // Enables the upgrade routes (not owned; it uses this AdminApi's hooks()). Before install().
  void set_upgrades(eval::UpgradeJobs* upgrades) { upgrades_ = upgrades; }
  // Fleet mode (not owned; null = a lone server): GET /admin/fleet lists the
  // replicas, and promote rolls across them. Before install().
  void set_fleet(FleetMember* member, FleetRollout* rollout) {
    fleet_ = member;
    rollout_ = rollout;
  }
  // What an upgrade needs of the admin API: adapter registration and the route reload.
  eval::UpgradeHooks upgrade_hooks();

  // Registers an adapter on `base` ("" = the serving base) in registry and
  // cache, validating by loading it; it is routable once both have it. Also
  // used at start for configured preloads. Returns the stored record.
  Result<AdapterRecord> register_adapter(const std::string& name, const std::string& path,
                                         const std::string& base = "");
  // register_adapter for a folder the server chose itself (an upgrade's
  // retrained adapter, `real` already resolved): not checked against the roots.
  Result<AdapterRecord> register_adapter_at(const std::string& name, const std::string& real,
                                            const std::string& base);
  // Refuses new requests for the adapter on `base` and forgets its registration.
  Status unregister_adapter(const std::string& name, const std::string& base = "");
  // Starts loading a candidate base (path checked against the base roots).
  Status add_base(const std::string& name, const std::string& path, WeightType dtype);
  // The training set of scenario `scenario` from a client's `path` (inside the
  // training or adapter roots, a regular file, hashed now) and training
  // `config` (validated; stored with every key). Writes nothing.
  Result<TrainingSetRecord> training_set_for(const std::string& scenario, const std::string& path,
                                             const nlohmann::json& config) const;

 private:
  // One per resource file; each adds its routes behind `gate`.
  void install_adapters(Router& router, const AdminGate& gate);
  void install_scenarios(Router& router, const AdminGate& gate);
  void install_bases(Router& router, const AdminGate& gate);
  void install_evaluations(Router& router, const AdminGate& gate);
  void install_upgrades(Router& router, const AdminGate& gate);
  void install_fleet(Router& router, const AdminGate& gate);
  void install_prefix_cache(Router& router, const AdminGate& gate);
  // POST /admin/bases/{name}/promote in fleet mode: a rollout across every replica.
  void promote_across_fleet(const std::shared_ptr<Exchange>& ex, const std::string& name, bool force,
                            const std::string& actor, const AdminGate& gate);
  // The shadow routes under /admin/bases/{name}/shadow, on the strand (in memory).
  void set_shadow(const std::shared_ptr<Exchange>& ex, const std::string& base, const AdminGate& gate);
  void describe_shadow(const std::shared_ptr<Exchange>& ex, const std::string& base, const AdminGate& gate);

  Result<std::shared_ptr<ServingBase>> base_named(const std::string& name) const;
  // already_exists when `name` is a base's (or the served) name: an adapter must not shadow it.
  Status check_not_a_base_name(const std::string& name) const;
  void routes_changed();

  AdminOptions options_;
  Registry* registry_;
  BaseSet* bases_;
  const Metrics* metrics_;
  eval::EvaluationJobs* jobs_;
  ShadowTraffic* shadow_ = nullptr;
  eval::UpgradeJobs* upgrades_ = nullptr;
  EvaluationStore* evaluations_;
  RegistryModelResolver* routes_ = nullptr;
  FleetMember* fleet_ = nullptr;
  FleetRollout* rollout_ = nullptr;
};

}  // namespace loragate
