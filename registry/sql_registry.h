// SqlRegistry: the Registry on one SQL connection (sql_connection.h), SQLite
// or PostgreSQL (see registry.h; schemas in schema.h and pg_schema.h).
// Internal to registry/: Registry::open() makes one. Its methods live by job:
// sql_registry.cpp (row readers, opening), sql_registry_bases.cpp (base
// models, swaps), sql_registry_adapters.cpp, sql_registry_scenarios.cpp,
// sql_registry_training.cpp (the scenarios' training sets),
// sql_registry_fleet.cpp (replicas, rollouts, the change wait).
//
// One connection, guarded by mu_: it keeps a multi-statement transaction, and
// the error text of a failed call, to one thread. Registry traffic is admin
// routes, heartbeats and start-up, so one connection is plenty. Writers in
// other processes (replicas) are serialised by the database: SQLite's write
// lock, PostgreSQL's advisory lock taken by every write transaction.
// wait_for_change has its own connection on PostgreSQL (listener_, which
// locks itself) and so never holds mu_ while it waits.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "registry/registry.h"
#include "registry/pg_listener.h"
#include "registry/sql_connection.h"

namespace loragate::registry_detail {

// The columns each row reader expects, in its order.
inline constexpr const char* kAdapterColumns =
    "name, base_model, path, rank, alpha, target_modules, sha256, size_bytes, state, created_at, updated_at";
inline constexpr const char* kBaseModelColumns = "name, path, state, dtype, sha256, error, created_at, updated_at";
inline constexpr const char* kScenarioColumns = "name, base_model, adapter, created_at, updated_at";
inline constexpr const char* kTrainingSetColumns = "scenario, path, sha256, config, created_at, updated_at";
inline constexpr const char* kReplicaColumns = "url, serving, bases, adapters, desired_base, started_at, last_seen";
inline constexpr const char* kRolloutColumns =
    "id, started_at, updated_at, kind, from_base, to_base, coordinator, state, steps, error";
inline constexpr const char* kSwapColumns = "id, at, actor, from_base, to_base, kind, forced, note";

// Seconds since the epoch, for created_at / updated_at / at.
int64_t unix_now();

// 's', built by appends: GCC 12 misreports "'" + s as an overlapping memcpy.
std::string in_quotes(const std::string& s);

class SqlRegistry final : public Registry {
 public:
  // `listener` is null on SQLite, whose wait_for_change polls the connection.
  SqlRegistry(std::unique_ptr<SqlConnection> db, std::unique_ptr<PgChangeListener> listener)
      : db_(std::move(db)), listener_(std::move(listener)) {}

  Result<BaseModelRecord> upsert_base_model(const BaseModelRecord& record) override;
  Result<BaseModelRecord> get_base_model(const std::string& name) override;
  Result<std::vector<BaseModelRecord>> list_base_models() override;
  Status set_base_state(const std::string& name, BaseModelState state, const std::string& error) override;
  Result<SwapRecord> record_swap(const SwapRecord& swap) override;
  Result<std::vector<SwapRecord>> list_swaps(int64_t limit) override;

  Result<AdapterRecord> add_adapter(const AdapterRecord& record) override;
  Result<AdapterRecord> get_adapter(const std::string& name, const std::string& base_model) override;
  Result<std::vector<AdapterRecord>> list_adapters(const std::string& base_model) override;
  Status set_adapter_state(const std::string& name, const std::string& base_model, AdapterState state) override;
  Status remove_adapter(const std::string& name, const std::string& base_model) override;

  Result<ScenarioRecord> set_scenario(const std::string& name, const std::string& base_model,
                                      const std::string& adapter) override;
  Status remove_scenario(const std::string& name, const std::string& base_model) override;
  Result<std::vector<ScenarioRecord>> list_scenarios(const std::string& base_model) override;
  Result<std::string> resolve_scenario(const std::string& name, const std::string& base_model) override;

  Result<TrainingSetRecord> set_training_set(const TrainingSetRecord& record) override;
  Result<TrainingSetRecord> get_training_set(const std::string& scenario) override;
  Result<std::vector<TrainingSetRecord>> list_training_sets() override;

  Result<ReplicaRecord> upsert_replica(const ReplicaRecord& record) override;
  Result<std::vector<ReplicaRecord>> list_replicas() override;
  Status set_replica_desired_base(const std::string& url, const std::string& base) override;
  Status remove_replica(const std::string& url) override;
  Result<RolloutRecord> add_rollout(const RolloutRecord& record) override;
  Status update_rollout(const RolloutRecord& record) override;
  Result<RolloutRecord> get_rollout(int64_t id) override;
  Result<std::vector<RolloutRecord>> list_rollouts(int64_t limit) override;
  Result<bool> wait_for_change(int64_t timeout_ms) override;

 private:
  // Row readers: the current row of a SELECT of k*Columns.
  Result<BaseModelRecord> read_base_model(const Statement& row) const;
  Result<AdapterRecord> read_adapter(const Statement& row) const;
  static ScenarioRecord read_scenario(const Statement& row);
  static TrainingSetRecord read_training_set(const Statement& row);
  static ReplicaRecord read_replica(const Statement& row);
  static RolloutRecord read_rollout(const Statement& row);
  Result<SwapRecord> read_swap(const Statement& row) const;

  // The queries behind the public calls; the caller holds mu_.
  Result<BaseModelRecord> find_base_model(const std::string& name);
  Result<AdapterRecord> find_adapter(const std::string& name, const std::string& base_model);
  Result<TrainingSetRecord> find_training_set(const std::string& scenario);
  Result<ReplicaRecord> find_replica(const std::string& url);
  Result<RolloutRecord> find_rollout(int64_t id);
  // not_found unless adapter (name, base_model) exists; invalid_argument
  // naming every scenario of that base that uses it when there is one.
  Status check_adapter_unused(const std::string& name, const std::string& base_model, const std::string& doing);
  // Commits a write that may change what a replica serves: notifies the
  // listeners (PostgreSQL) and counts it for SQLite's wait_for_change.
  Status commit_change(Transaction& txn);
  // The bases other than `base_model` that hold an adapter called `name`,
  // quoted and comma-separated ("" when none): a hint for not_found messages.
  Result<std::string> other_bases_with_adapter(const std::string& name, const std::string& base_model);

  std::mutex mu_;
  std::unique_ptr<SqlConnection> db_;  // guarded by mu_
  std::unique_ptr<PgChangeListener> listener_;  // PostgreSQL only; locks itself
  // SQLite's wait_for_change: what it saw last of data_version (commits of
  // other connections) and of own_changes_ (this registry's commit_change calls).
  int64_t seen_data_version_ = -1, seen_own_changes_ = -1;  // guarded by mu_
  int64_t own_changes_ = 0;                                 // guarded by mu_
};

}  // namespace loragate::registry_detail
