// UpgradeStore: the record of upgrades (upgrade/upgrade_job.h) in the
// registry's database (table `upgrades`, schema.h migration 6). An upgrade
// retrains every scenario's adapter on a candidate base, evaluates it and may
// promote it; its row is rewritten after every step, so that a restart finds
// what was done (the steps, as JSON) and what was running (mark_interrupted).
//
// Ownership: open() returns the only owner of its own connection (a second
// connection on the registry: on a SQLite file WAL lets both work). Thread-safety: every
// method may be called from any thread; calls are serialised on a mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"

namespace loragate {

class SqlConnection;

// UpgradeRecord::state values that mean "not finished": a restart finds them
// interrupted.
bool upgrade_state_is_running(const std::string& state);
// Every state an upgrade may be in.
bool upgrade_state_is_known(const std::string& state);

struct UpgradeRecord {
  int64_t id = 0;                   // set by add()
  int64_t started_at = 0;           // unix seconds, set by add()
  int64_t updated_at = 0;           // unix seconds, set by add() and update()
  std::string candidate;            // the candidate base's name
  std::string candidate_path;       // its model directory
  std::string online_base;          // the base that served when it started
  bool promote = false;             // promote when the evaluation passes
  bool skip_untrained = false;      // scenarios without a training set do not block it
  // queued | judging_base | transferring | training | evaluating | promoting
  // (running), passed | failed |
  // promoted | cancelled | interrupted (finished; interrupted and cancelled
  // ones resume when the same candidate is asked for again).
  std::string state = "queued";
  std::string steps = "[]";         // JSON: the upgrade's strategy, stages and steps (upgrade/upgrade_status.h)
  std::string verdict;              // "" until judged
  int64_t evaluation = 0;           // the evaluation run's id; 0 = none yet
  std::string report;               // the report's path; "" = none yet
  std::string error;                // why it failed, was cancelled or interrupted
};

class UpgradeStore {
 public:
  // Opens (creating and migrating when needed) the registry at `path`: a
  // SQLite file or a "postgresql://" URL, as Registry::open.
  static Result<std::unique_ptr<UpgradeStore>> open(const std::string& path);
  ~UpgradeStore();
  UpgradeStore(const UpgradeStore&) = delete;
  UpgradeStore& operator=(const UpgradeStore&) = delete;

  // Stores a new upgrade; returns its id.
  Result<int64_t> add(const UpgradeRecord& record);
  // Rewrites upgrade `record.id` (all but started_at); not_found naming it.
  Status update(const UpgradeRecord& record);
  // The upgrade with `id` (not_found naming it).
  Result<UpgradeRecord> get(int64_t id);
  // The most recent upgrades first, at most `limit`.
  Result<std::vector<UpgradeRecord>> list(int64_t limit = 50);
  // After a restart: every upgrade left running becomes "interrupted" (its
  // error says so). Returns how many.
  Result<int64_t> mark_interrupted();

 private:
  explicit UpgradeStore(std::unique_ptr<SqlConnection> db);

  std::mutex mu_;
  std::unique_ptr<SqlConnection> db_;  // guarded by mu_
};

}  // namespace loragate
