// Registry: the persistent record of what loragate serves — the base model
// generations (one serving, others loading, candidate, previous, failed or
// retired), the LoRA adapters registered on each, the scenarios that route a
// tenant's use case to one adapter of one base, the training set each
// scenario's adapter is retrained from on a new base, and the history of base
// swaps. The gateway's admin routes write it and every registration is
// restored from it at server start.
//
// The interface is narrow and speaks only in plain records (records.h) so
// that the storage can change — SQLite today (Registry::open), a shared SQL
// server when loragate runs as replicas — without touching the callers.
//
// Rules the registry enforces, whatever the storage:
//   - base model names are unique; an adapter name is a tenant's handle
//     across bases, unique per base model: adapters are keyed by (name,
//     base_model), and so are scenarios;
//   - an adapter belongs to one registered base model, which is not retired
//     or failed when the adapter is added;
//   - a scenario points at a ready adapter of its own base model;
//   - a training set belongs to a scenario name that exists on some base; it
//     goes when the last scenario of that name is removed;
//   - an adapter that a scenario uses cannot be removed (or marked removing):
//     the error names the scenarios;
//   - only record_swap moves a base into serving (set_base_state refuses);
//     after any record_swap exactly one base is serving, the base(s) that
//     served before it are previous (the rollback target) and any earlier
//     previous base is candidate again. upsert_base_model writes the state it
//     is given, so start-up may register its base as serving;
//   - every swap is kept in the history, newest first in list_swaps;
//   - every write is one transaction: readers see all of it or none of it.
//
// Errors: invalid_argument (malformed record, duplicate name, a rule above),
// failed_precondition (an adapter a scenario still uses: the message names
// the scenarios), not_found (the name does not exist; the message names it
// and its base),
// corrupt (the stored data is unreadable), io_error / resource_exhausted / unavailable (the
// storage failed or stayed locked), unsupported (a schema newer than this
// build).
//
// Ownership: open() returns the only owner. Thread-safety: every method may
// be called from any thread at any time. The registry serialises calls on
// one connection with a std::mutex (a SQLite connection is opened
// SQLITE_OPEN_NOMUTEX): SQLite's FULLMUTEX alone would not keep a
// multi-statement transaction to one thread. Other processes (or other
// Registry objects on the same database) are arbitrated by SQLite's locks,
// WAL snapshots and a 5 s busy timeout, or by PostgreSQL's transactions with
// an advisory lock that every write transaction takes.
//
// PostgreSQL down: calls fail with unavailable naming the server (HTTP 503)
// (host:port/dbname, never a password) and the next call connects again, so
// the registry recovers when the server does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "registry/records.h"

namespace loragate {

// Whether registry location `path` names a PostgreSQL database (it starts
// with "postgresql://" or "postgres://") rather than a SQLite file: callers
// make no directories for it and resolve no file paths against it.
bool is_postgres_url(std::string_view path);
// How a registry location may be shown in logs, banners and responses: a
// PostgreSQL URL without its password or other options (host, port and
// database only), a SQLite path as it is.
std::string registry_display_name(const std::string& path);

class Registry {
 public:
  // Opens the registry at `path`: PostgreSQL when it starts with
  // "postgresql://" or "postgres://" (a libpq connection URI), else the
  // SQLite file at `path`, created when it does not exist. Either is migrated
  // to the current schema (schema.h). ":memory:" gives a private in-memory
  // registry, for tests. A file that is not a SQLite database is refused as
  // corrupt; a schema from a newer loragate as unsupported; both messages
  // name the path.
  static Result<std::unique_ptr<Registry>> open(const std::string& path);

  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
  virtual ~Registry() = default;

  // --- base models ---
  // Adds the base model, or updates the path, state, dtype, sha256 and error
  // of the one with this name (keeping its created_at). `error` is stored
  // only when the state is kFailed ("" otherwise). Returns the stored record.
  virtual Result<BaseModelRecord> upsert_base_model(const BaseModelRecord& record) = 0;
  virtual Result<BaseModelRecord> get_base_model(const std::string& name) = 0;
  // Every base model, by name.
  virtual Result<std::vector<BaseModelRecord>> list_base_models() = 0;
  // Moves base `name` to `state` with `error` (kept only for kFailed; ""
  // otherwise). not_found when the base is unknown. Refuses kServing
  // (invalid_argument): only record_swap makes a base serving.
  virtual Status set_base_state(const std::string& name, BaseModelState state, const std::string& error = "") = 0;

  // --- base swaps ---
  // One transaction: swap.to_base becomes serving (it stays serving when it
  // already was); every other serving base becomes previous; every other
  // base that was previous becomes candidate; the swap is added to the
  // history with its id and `at` set here. swap.from_base is stored as given.
  // not_found when to_base is not registered; invalid_argument when it is
  // loading, failed or retired, or the record is malformed (records.h).
  // Returns the stored row.
  virtual Result<SwapRecord> record_swap(const SwapRecord& swap) = 0;
  // The most recent swaps first, at most `limit` (>= 1, else invalid_argument).
  virtual Result<std::vector<SwapRecord>> list_swaps(int64_t limit = 100) = 0;

  // --- adapters: keyed by (name, base_model) ---
  // Registers a new adapter on a registered base model; created_at and
  // updated_at are set here. Returns the stored record. A taken (name, base)
  // is invalid_argument ("adapter 'x' already exists on base model 'b'"); an
  // unknown base model not_found; a retired or failed one invalid_argument.
  // The same name on another base is a separate adapter.
  virtual Result<AdapterRecord> add_adapter(const AdapterRecord& record) = 0;
  virtual Result<AdapterRecord> get_adapter(const std::string& name, const std::string& base_model) = 0;
  // The adapters of `base_model` (all adapters when empty), by base model
  // then name.
  virtual Result<std::vector<AdapterRecord>> list_adapters(const std::string& base_model = "") = 0;
  // Moves the adapter to `state`. kRemoving is refused while a scenario of
  // that base uses it.
  virtual Status set_adapter_state(const std::string& name, const std::string& base_model, AdapterState state) = 0;
  // Deletes the adapter's registration on that base (never its files, nor
  // the adapter of the same name on other bases). Refused while a scenario
  // of that base uses it; the message names the scenarios.
  virtual Status remove_adapter(const std::string& name, const std::string& base_model) = 0;

  // --- scenarios ---
  // Creates scenario (name, base_model) or repoints it at adapter (`adapter`,
  // base_model), which must exist and be ready (not_found names the other
  // bases that have an adapter of that name). Returns the stored record.
  virtual Result<ScenarioRecord> set_scenario(const std::string& name, const std::string& base_model,
                                              const std::string& adapter) = 0;
  virtual Status remove_scenario(const std::string& name, const std::string& base_model) = 0;
  // The scenarios of `base_model` (all when empty), by base model then name.
  virtual Result<std::vector<ScenarioRecord>> list_scenarios(const std::string& base_model = "") = 0;
  // The adapter that scenario `name` uses on `base_model`.
  virtual Result<std::string> resolve_scenario(const std::string& name, const std::string& base_model) = 0;

  // --- training sets: per scenario name, shared by that scenario on every base ---
  // Records (or replaces) the training set of scenario `record.scenario`,
  // which must exist on at least one base (not_found otherwise). Returns the
  // stored record. Removing the last scenario of that name removes it too.
  virtual Result<TrainingSetRecord> set_training_set(const TrainingSetRecord& record) = 0;
  // The training set of scenario `scenario`; not_found when it has none.
  virtual Result<TrainingSetRecord> get_training_set(const std::string& scenario) = 0;
  // Every training set, by scenario name.
  virtual Result<std::vector<TrainingSetRecord>> list_training_sets() = 0;

  // --- the fleet: replicas sharing this registry (fleet/) ---
  // Records the replica's heartbeat: inserts or rewrites row `record.url`
  // (all but desired_base, which only set_replica_desired_base writes);
  // last_seen is set here. Returns the stored record. Does not wake
  // wait_for_change (heartbeats change nothing a replica serves).
  virtual Result<ReplicaRecord> upsert_replica(const ReplicaRecord& record) = 0;
  // Every replica ever recorded (lost ones included), by url.
  virtual Result<std::vector<ReplicaRecord>> list_replicas() = 0;
  // Asks replica `url` to serve `base` ("" = the fleet's serving base).
  // not_found when the replica is unknown.
  virtual Status set_replica_desired_base(const std::string& url, const std::string& base) = 0;
  // Forgets replica `url` (not_found when unknown).
  virtual Status remove_replica(const std::string& url) = 0;
  // Stores a new rollout; id, started_at and updated_at are set here.
  virtual Result<RolloutRecord> add_rollout(const RolloutRecord& record) = 0;
  // Rewrites rollout `record.id` (all but started_at); not_found naming it.
  virtual Status update_rollout(const RolloutRecord& record) = 0;
  virtual Result<RolloutRecord> get_rollout(int64_t id) = 0;
  // The most recent rollouts first, at most `limit` (>= 1).
  virtual Result<std::vector<RolloutRecord>> list_rollouts(int64_t limit = 20) = 0;

  // Waits until a write that may change what a replica serves (adapters,
  // scenarios, bases, swaps, desired bases, rollouts) was committed by any
  // process (this one included), or `timeout_ms` passes. True when there may
  // have been one: spurious trues are allowed, missed ones are not, beyond
  // the window of a connection lost and found again (a caller reconciles
  // after any true and periodically anyway). One caller at a time.
  virtual Result<bool> wait_for_change(int64_t timeout_ms) = 0;
};

}  // namespace loragate
