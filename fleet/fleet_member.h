// FleetMember: what makes one loragate process a replica of a fleet that
// shares a registry (PostgreSQL in production, a SQLite file on one host).
//
// A background thread
//   - writes this replica's heartbeat row every `heartbeat` (url, serving
//     base, loaded bases with their states, adapters in its caches);
//   - reconciles this process with the registry whenever the registry
//     reports a change (Registry::wait_for_change: LISTEN/NOTIFY on
//     PostgreSQL) and every `reconcile` anyway, so that a missed notification
//     or a restart still converges:
//       * bases the registry holds as serving, candidate, previous or loading
//         and this process lacks are loaded; retired ones are unloaded;
//       * this process serves the base its replica row's desired_base names
//         (a rollout in progress), else the registry's serving base, as soon
//         as that base is loaded here (BaseSet::follow: nothing recorded);
//       * adapters registered on a loaded base are added to its cache, and
//         those that left the registry since the last pass leave the cache
//         (only those: one being registered through this process right now
//         is in the cache before it is in the registry);
//       * the routes are reloaded (scenarios);
//       * a rollout still rolling whose coordinator's heartbeat stopped is
//         ended as failed and every desired base is cleared, so a dead
//         coordinator never leaves the fleet split.
//
// Thread-safety: start/stop from one thread; reconcile_now and
// heartbeat_now may be called from any thread (they serialise on a mutex).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "bases/base_set.h"
#include "common/status.h"
#include "registry/registry.h"

namespace loragate {

struct FleetOptions {
  std::string url;                                 // this replica's address, as the others and the proxy reach it
  std::chrono::milliseconds heartbeat{1000};       // how often it reports itself
  std::chrono::milliseconds reconcile{5000};       // reconcile at least this often without notifications
  std::chrono::milliseconds lost_after{3000};      // a heartbeat older than this: the replica is lost
};

// Milliseconds since the epoch (the unit of ReplicaRecord::last_seen).
int64_t fleet_now_ms();
// Whether `replica` counts as lost at `now_ms`.
bool replica_lost(const ReplicaRecord& replica, const FleetOptions& options, int64_t now_ms);

class FleetMember {
 public:
  // None owned; all must outlive this. `routes_changed` reloads the routes
  // (scenarios) after a reconcile.
  FleetMember(FleetOptions options, Registry* registry, BaseSet* bases, std::function<void()> routes_changed);
  ~FleetMember();
  FleetMember(const FleetMember&) = delete;
  FleetMember& operator=(const FleetMember&) = delete;

  // The base this replica should serve now, by the registry: its desired
  // base, else the fleet's serving base ("" when none is recorded).
  Result<std::string> target_base();
  // One heartbeat / one reconcile pass, now (start() runs them on its thread).
  Status heartbeat_now();
  Status reconcile_now();
  // Starts and stops the background thread.
  void start();
  void stop();

  const FleetOptions& options() const { return options_; }

 private:
  void run();
  Status reconcile_bases(const std::vector<BaseModelRecord>& records);
  Status reconcile_adapters();
  Status end_orphaned_rollouts();
  bool loading_here() const;

  const FleetOptions options_;
  Registry* const registry_;
  BaseSet* const bases_;
  const std::function<void()> routes_changed_;
  const int64_t started_at_;

  std::mutex pass_mu_;  // one heartbeat or reconcile at a time
  std::set<std::pair<std::string, std::string>> registered_;  // (base, adapter) seen last pass; guarded by pass_mu_

  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace loragate
