// BaseSet: the base-model generations loaded in one process, and the one
// that serves.
//
// At most one base is serving; the others are loading, candidate, draining
// (demoted, still finishing the requests it had), previous (kept loaded for
// rollback) or failed. serving() is what a new request captures; promote()
// makes a candidate serve in one pointer store, after which every new request
// runs on it while the old base drains by itself and stays loaded as
// previous; rollback() promotes the previous base the same way. Loads run one
// at a time on the set's BaseLoader (progress and errors in list()); a
// memory budget over every loaded base's weights, KV pool and adapters (a
// removed base's too, until it is really freed) refuses a load that would
// not fit. Every base shares one ComputeGate: the serving base's steps first.
//
// With a Registry, every state and swap is recorded there (a promote is one
// transaction, committed before the pointer moves, so a crash at any point
// restarts on exactly one serving base) and a base's registered adapters are
// added to its cache when it loads. Without one (tests), nothing persists.
//
// This file is the state map; the rest lives beside it by job: the registry
// records (base_records.h), what a promote asks first (promotion_policy.h)
// and the loader thread (base_loader.h).
//
// Thread-safety: every public method may be called from any thread. Admin
// operations (add, remove, promote, rollback) are serialised; serving(), on
// every request's path, is one atomic shared_ptr load and takes no lock;
// find() takes a short one. A removed base is destroyed on the reaper thread
// once no request holds it, never on its own step thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bases/base_loader.h"
#include "bases/base_state.h"
#include "bases/serving_base.h"
#include "registry/registry.h"

namespace loragate {

struct BaseSetOptions {
  EngineOptions engine;               // every base loads with these (its own dtype)
  double candidate_share = 0.25;      // engine.candidate_share: a candidate's share of compute time while serving works
  int64_t memory_budget_bytes = 0;    // engine.memory_budget_mib: all loaded bases together; 0 = no limit
};

struct BaseStatus {
  std::string name, path, dtype;
  BaseState state = BaseState::kLoading;
  std::string sha256, fingerprint;    // "" until loaded
  std::string error;                  // why it failed
  int64_t weights_bytes = 0, kv_bytes = 0, adapter_bytes = 0;  // estimated while loading
  int64_t in_flight = 0;              // requests running on it
  std::vector<std::string> adapters;  // names in its adapter cache
};

class BaseSet {
 public:
  BaseSet(BaseSetOptions options, Registry* registry);  // `registry` may be null; not owned
  ~BaseSet();
  BaseSet(const BaseSet&) = delete;
  BaseSet& operator=(const BaseSet&) = delete;

  // Loads `spec` on the caller's thread and makes it serve (start-up, or a
  // restart that the registry says serves `spec`). Fails if a base serves already.
  Status start_serving(const BaseSpec& spec, const std::string& actor);
  // Checks the directory and the memory budget now (insufficient_memory when
  // it does not fit), then loads in the background; the base ends as
  // `after_load` (candidate, or previous when a restart restores the rollback
  // target) or failed.
  // `record` false: its states are not written to the registry (a fleet
  // replica loading a base the shared registry already records).
  Status add(const BaseSpec& spec, BaseState after_load = BaseState::kCandidate, bool record = true);
  // Unloads a non-serving, non-loading base; its registry record is retired
  // (its adapters and scenarios stay, for when it is added again).
  Status remove(const std::string& name);
  // Makes candidate or previous base `name` serve. Refused (failed_precondition,
  // naming them) while a ready adapter name or a scenario of the serving base
  // has no version on it, unless `force`.
  Result<SwapRecord> promote(const std::string& name, bool force, const std::string& actor);
  // Promotes the previous base back, whatever it lacks.
  Result<SwapRecord> rollback(const std::string& actor);
  // Makes loaded base `name` serve because a fleet's shared registry says so
  // (another replica recorded the swap, or a rollout asks this replica): the
  // pointer move of promote(), counted under `kind`, with no check and
  // nothing recorded. OK at once when it serves already; not_found or
  // failed_precondition when it is not loaded.
  Status follow(const std::string& name, const std::string& kind);
  // Asked before every promote: why the candidate may not serve yet, one
  // line per reason (e.g. no passing evaluation; empty = it may). Without
  // force a reason or an error refuses the promote; with force the swap is
  // recorded as forced, its note naming every reason it overrode.
  using PromoteCheck =
      std::function<Result<std::vector<std::string>>(const ServingBase& serving, const ServingBase& candidate)>;
  void set_promote_check(PromoteCheck check);
  bool has_promote_check();
  // What promote(name) without force would refuse for now, one line per
  // reason (empty = it would promote): the names missing on it and the
  // promote check's reasons. For listings; promote() decides again.
  Result<std::vector<std::string>> promotion_blockers(const std::string& name);

  // The serving base (null before start_serving). Lock-free: one atomic load.
  std::shared_ptr<ServingBase> serving() const { return serving_.load(); }
  // A loaded base by name (not loading or failed): not_found or failed_precondition saying why not.
  Result<std::shared_ptr<ServingBase>> find(const std::string& name) const;
  std::vector<BaseStatus> list() const;
  // Blocks until `name` is no longer loading or `deadline`; false on timeout or unknown name.
  bool wait_loaded(const std::string& name, std::chrono::steady_clock::time_point deadline) const;

  int64_t swaps_total(const std::string& kind) const;  // "promote" or "rollback"
  const BaseSetOptions& options() const { return options_; }
  const ComputeGate& gate() const { return *gate_; }
  // For work that is not an engine step but computes on the same pool (in-server training).
  ComputeGate& compute_gate() const { return *gate_; }
  Registry* registry() const { return registry_; }

 private:
  struct Entry {
    BaseSpec spec;
    BaseState state = BaseState::kLoading;
    std::shared_ptr<ServingBase> base;  // null while loading or failed
    MemoryEstimate estimate;            // before loading
    std::string error;
    bool recorded = true;               // its states are written to the registry
  };
  Status check_budget_locked(const std::string& name, const MemoryEstimate& need) const;
  void load_in_background(const BaseSpec& spec, BaseState after_load);
  Result<SwapRecord> swap_to(const std::string& name, const std::string& kind, bool forced, const std::string& note,
                             const std::string& actor);
  void switch_serving(const std::string& name, const std::string& kind);
  void record_state(const Entry& e);
  void reaper_main();

  const BaseSetOptions options_;
  Registry* const registry_;
  const std::shared_ptr<ComputeGate> gate_;

  std::mutex admin_mu_;                    // serialises add/remove/promote/rollback
  PromoteCheck promote_check_;             // guarded by admin_mu_
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::map<std::string, Entry> entries_;   // guarded by mu_
  std::string serving_name_;               // guarded by mu_; "" = none yet
  std::atomic<std::shared_ptr<ServingBase>> serving_;  // stored under mu_ with serving_name_; loaded freely
  std::map<std::string, int64_t> swaps_;   // guarded by mu_
  std::vector<std::shared_ptr<ServingBase>> graveyard_;  // guarded by mu_: removed, maybe still in use
  int64_t freeing_bytes_ = 0;              // guarded by mu_: of bases the reaper took and frees now
  bool stopping_ = false;                  // guarded by mu_
  std::thread reaper_;
  BaseLoader loader_;                      // stopped first in ~BaseSet: its loads use everything above
};

}  // namespace loragate
