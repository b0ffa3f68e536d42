// FleetRollout: a base promote that rolls across every live replica of a
// fleet, driven by the replica whose admin route was asked (the coordinator).
//
//   1. The candidate must be promotable here (BaseSet::promotion_blockers:
//      the evaluation stored in the shared registry, adapters present) unless
//      forced, and loaded on every live replica (waited for up to
//      swap_timeout: the replicas load it by themselves, FleetMember).
//   2. A rollout record is stored ("rolling"). Replicas swap in batches of at
//      most max_unavailable (the coordinator last): each is asked through its
//      registry row (desired_base), then must report serving the candidate in
//      its heartbeat and pass its checks: /ready answers 200; a smoke request
//      per scenario of the candidate (X-Scenario) answers 200 from the
//      candidate (X-Base); its 5xx count in /metrics did not rise.
//   3. On any failed check every replica asked so far is released (its
//      desired base cleared: it returns to the fleet's serving base, which has
//      not changed), the rollout is stored "rolled_back" with the reason, and
//      the promote fails with it. Otherwise the swap is recorded in the
//      registry (the fleet's serving base is the candidate from then on, for
//      replicas that restart or join), desired bases are cleared and the
//      rollout is stored "done".
// A coordinator that dies mid-rollout is noticed by the other replicas
// (FleetMember::end_orphaned_rollouts), which end it the same way.
//
// Thread-safety: one rollout at a time per process (a mutex); promote()
// blocks for the whole rollout: run it off the network threads.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "bases/base_set.h"
#include "common/status.h"
#include "fleet/fleet_member.h"
#include "registry/registry.h"

namespace loragate {

struct RolloutOptions {
  int max_unavailable = 1;                      // replicas swapping at once
  std::chrono::milliseconds swap_timeout{120000};  // to load the candidate, and to report serving it
  std::string admin_token;                      // sent to replicas' /metrics
};

class FleetRollout {
 public:
  // None owned; all must outlive this.
  FleetRollout(RolloutOptions options, FleetMember* self, Registry* registry, BaseSet* bases);

  // Rolls `to` across the fleet (see above). Returns the stored rollout
  // ("done"); on a failed check, failed_precondition naming the replica and
  // the check, with the rollout stored "rolled_back".
  Result<RolloutRecord> promote(const std::string& to, bool force, const std::string& actor);

 private:
  // The replicas alive now, the coordinator last.
  Result<std::vector<ReplicaRecord>> live_replicas();
  // Waits until every one of `urls` reports `base` in state `state` ("" =
  // any loaded state) or serving it (`serving`), or the timeout; the error
  // names the ones that did not.
  Status wait_for(const std::vector<std::string>& urls, const std::string& base, bool serving);
  // The post-swap checks of one replica; `errors_before` is its 5xx count before it swapped.
  Status check_replica(const std::string& url, const std::string& base, int64_t errors_before);
  // Releases `asked`, waits (bounded) for them to serve `from` again, stores the rollout rolled back.
  Status roll_back(RolloutRecord& record, const std::vector<std::string>& asked, const std::string& why);

  const RolloutOptions options_;
  FleetMember* const self_;
  Registry* const registry_;
  BaseSet* const bases_;
  std::mutex mu_;  // one rollout at a time
};

// The 5xx generation responses replica `url` counted (loragate_requests_total
// with status >= 500, from its /metrics).
Result<int64_t> replica_server_errors(const std::string& url, const std::string& admin_token);

}  // namespace loragate
