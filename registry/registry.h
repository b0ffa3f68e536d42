// Registry: the persistent record of what loragate serves — base models, the
// LoRA adapters registered on them, and the scenarios that route a tenant's
// use case to one adapter of one base. The gateway's admin routes write it
// and every registration is restored from it at server start.
//
// The interface is narrow and speaks only in plain records (records.h) so
// that the storage can change — SQLite today (Registry::open), a shared SQL
// server when loragate runs as replicas — without touching the callers.
//
// Rules the registry enforces, whatever the storage:
//   - base model names, adapter names, and (scenario, base model) pairs are
//     unique;
//   - an adapter belongs to one registered base model;
//   - a scenario points at a ready adapter of its own base model;
//   - an adapter that a scenario uses cannot be removed (or marked removing):
//     the error names the scenarios;
//   - every write is one transaction: readers see all of it or none of it.
//
// Errors: invalid_argument (malformed record, duplicate name, a rule above),
// not_found (the name does not exist; the message names it), corrupt (the
// stored data is unreadable), io_error / resource_exhausted (the storage
// failed or stayed locked), unsupported (a schema newer than this build).
//
// Ownership: open() returns the only owner. Thread-safety: every method may
// be called from any thread at any time. The SQLite registry serialises calls
// on one connection with a std::mutex (the connection itself is opened
// SQLITE_OPEN_NOMUTEX): SQLite's FULLMUTEX alone would not keep a
// multi-statement transaction to one thread. Other processes (or other
// Registry objects on the same file) are arbitrated by SQLite's locks, WAL
// snapshots and a 5 s busy timeout.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "registry/records.h"

namespace loragate {

class Registry {
 public:
  // Opens the SQLite registry at `path`, creating the file when it does not
  // exist and migrating it to the current schema (schema.h). ":memory:" gives
  // a private in-memory registry, for tests. A file that is not a SQLite
  // database is refused as corrupt; a schema from a newer loragate as
  // unsupported; both messages name the path.
  static Result<std::unique_ptr<Registry>> open(const std::string& path);

  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
  virtual ~Registry() = default;

  // --- base models ---
  // Adds the base model, or updates the path and state of the one with this
  // name (keeping its created_at). Returns the stored record.
  virtual Result<BaseModelRecord> upsert_base_model(const BaseModelRecord& record) = 0;
  virtual Result<BaseModelRecord> get_base_model(const std::string& name) = 0;
  // Every base model, by name.
  virtual Result<std::vector<BaseModelRecord>> list_base_models() = 0;

  // --- adapters ---
  // Registers a new adapter on a registered base model; created_at and
  // updated_at are set here. Returns the stored record. A taken name is
  // invalid_argument ("adapter 'x' already exists"); an unknown base model
  // not_found.
  virtual Result<AdapterRecord> add_adapter(const AdapterRecord& record) = 0;
  virtual Result<AdapterRecord> get_adapter(const std::string& name) = 0;
  // The adapters of `base_model` (all adapters when empty), by name.
  virtual Result<std::vector<AdapterRecord>> list_adapters(const std::string& base_model = "") = 0;
  // Moves the adapter to `state`. kRemoving is refused while a scenario uses it.
  virtual Status set_adapter_state(const std::string& name, AdapterState state) = 0;
  // Deletes the adapter's registration (never its files). Refused while a
  // scenario uses it.
  virtual Status remove_adapter(const std::string& name) = 0;

  // --- scenarios ---
  // Creates scenario (name, base_model) or repoints it at `adapter`, which
  // must exist, be ready and belong to `base_model`. Returns the stored record.
  virtual Result<ScenarioRecord> set_scenario(const std::string& name, const std::string& base_model,
                                              const std::string& adapter) = 0;
  virtual Status remove_scenario(const std::string& name, const std::string& base_model) = 0;
  // The scenarios of `base_model` (all when empty), by base model then name.
  virtual Result<std::vector<ScenarioRecord>> list_scenarios(const std::string& base_model = "") = 0;
  // The adapter that scenario `name` uses on `base_model`.
  virtual Result<std::string> resolve_scenario(const std::string& name, const std::string& base_model) = 0;
};

}  // namespace loragate
