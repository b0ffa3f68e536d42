// SqliteRegistry: the Registry on one SQLite file (see registry.h, schema.h).
//
// One connection, guarded by mu_: SQLite's own FULLMUTEX would serialise
// single calls but not keep a multi-statement transaction, or the error text
// of a failed call, to one thread. Registry traffic is admin routes and
// start-up, so one connection is plenty.
#include <chrono>
#include <mutex>
#include <utility>

#include <nlohmann/json.hpp>

#include "registry/registry.h"
#include "registry/schema.h"
#include "registry/sqlite_db.h"

namespace loragate {
namespace {

// How long a write waits for another connection's (or process's) lock
// before giving up with resource_exhausted.
constexpr int kBusyTimeoutMs = 5000;

constexpr const char* kAdapterColumns =
    "name, base_model, path, rank, alpha, target_modules, sha256, size_bytes, state, created_at, updated_at";
constexpr const char* kBaseModelColumns = "name, path, state, dtype, sha256, error, created_at, updated_at";
constexpr const char* kScenarioColumns = "name, base_model, adapter, created_at, updated_at";
constexpr const char* kSwapColumns = "id, at, actor, from_base, to_base, kind, forced, note";

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// 's', built by appends: GCC 12 misreports "'" + s as an overlapping memcpy.
std::string in_quotes(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.append(1, '\'').append(s).append(1, '\'');
  return out;
}

class SqliteRegistry final : public Registry {
 public:
  explicit SqliteRegistry(std::unique_ptr<SqliteDb> db) : db_(std::move(db)) {}

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

 private:
  // Row readers: the current row of a SELECT of k*Columns.
  Result<BaseModelRecord> read_base_model(const Statement& row) const;
  Result<AdapterRecord> read_adapter(const Statement& row) const;
  static ScenarioRecord read_scenario(const Statement& row);
  Result<SwapRecord> read_swap(const Statement& row) const;

  // The queries behind the public calls; the caller holds mu_.
  Result<BaseModelRecord> find_base_model(const std::string& name);
  Result<AdapterRecord> find_adapter(const std::string& name, const std::string& base_model);
  // not_found unless adapter (name, base_model) exists; invalid_argument
  // naming every scenario of that base that uses it when there is one.
  Status check_adapter_unused(const std::string& name, const std::string& base_model, const std::string& doing);
  // The bases other than `base_model` that hold an adapter called `name`,
  // quoted and comma-separated ("" when none): a hint for not_found messages.
  Result<std::string> other_bases_with_adapter(const std::string& name, const std::string& base_model);

  std::mutex mu_;
  std::unique_ptr<SqliteDb> db_;  // guarded by mu_
};

// --- rows ---------------------------------------------------------------------

Result<BaseModelRecord> SqliteRegistry::read_base_model(const Statement& row) const {
  BaseModelRecord r;
  r.name = row.column_text(0);
  r.path = row.column_text(1);
  auto state = parse_base_model_state(row.column_text(2));
  if (!state) return Status::corrupt("registry " + in_quotes(db_->path()) + ": base model " + in_quotes(r.name) + ": " +
                                     state.status().message());
  r.state = *state;
  r.dtype = row.column_text(3);
  r.sha256 = row.column_text(4);
  r.error = row.column_text(5);
  r.created_at = row.column_int64(6);
  r.updated_at = row.column_int64(7);
  return r;
}

Result<AdapterRecord> SqliteRegistry::read_adapter(const Statement& row) const {
  AdapterRecord r;
  r.name = row.column_text(0);
  r.base_model = row.column_text(1);
  const std::string where = "registry " + in_quotes(db_->path()) + ": adapter " + in_quotes(r.name) +
                            " on base model " + in_quotes(r.base_model);
  r.path = row.column_text(2);
  r.rank = row.column_int64(3);
  r.alpha = row.column_double(4);
  const std::string modules_json = row.column_text(5);
  const nlohmann::json modules = nlohmann::json::parse(modules_json, nullptr, /*allow_exceptions=*/false);
  if (!modules.is_array()) return Status::corrupt(where + ": target_modules is not a JSON array: " + modules_json);
  for (const auto& m : modules) {
    if (!m.is_string()) return Status::corrupt(where + ": target_modules holds a non-string: " + modules_json);
    r.target_modules.push_back(m.get<std::string>());
  }
  r.sha256 = row.column_text(6);
  r.size_bytes = row.column_int64(7);
  auto state = parse_adapter_state(row.column_text(8));
  if (!state) return Status::corrupt(where + ": " + state.status().message());
  r.state = *state;
  r.created_at = row.column_int64(9);
  r.updated_at = row.column_int64(10);
  return r;
}

ScenarioRecord SqliteRegistry::read_scenario(const Statement& row) {
  ScenarioRecord r;
  r.name = row.column_text(0);
  r.base_model = row.column_text(1);
  r.adapter = row.column_text(2);
  r.created_at = row.column_int64(3);
  r.updated_at = row.column_int64(4);
  return r;
}

Result<SwapRecord> SqliteRegistry::read_swap(const Statement& row) const {
  SwapRecord r;
  r.id = row.column_int64(0);
  r.at = row.column_int64(1);
  r.actor = row.column_text(2);
  r.from_base = row.column_text(3);
  r.to_base = row.column_text(4);
  r.kind = row.column_text(5);
  r.forced = row.column_int64(6) != 0;
  r.note = row.column_text(7);
  if (r.kind != kSwapKindPromote && r.kind != kSwapKindRollback) {
    return Status::corrupt("registry " + in_quotes(db_->path()) + ": swap " + std::to_string(r.id) + " to base model " +
                           in_quotes(r.to_base) + ": unknown kind " + in_quotes(r.kind) +
                           " (expected promote or rollback)");
  }
  return r;
}

// --- base models --------------------------------------------------------------

Result<BaseModelRecord> SqliteRegistry::find_base_model(const std::string& name) {
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare(std::string("SELECT ") + kBaseModelColumns +
                                                " FROM base_models WHERE name = ?1"));
  q.bind(1, name);
  LG_ASSIGN_OR_RETURN(const bool found, q.step());
  if (!found) return Status::not_found("base model " + in_quotes(name) + " is not registered");
  return read_base_model(q);
}

Result<BaseModelRecord> SqliteRegistry::upsert_base_model(const BaseModelRecord& record) {
  LG_RETURN_IF_ERROR(validate(record));
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  const int64_t now = unix_now();
  LG_ASSIGN_OR_RETURN(
      Statement upsert,
      db_->prepare("INSERT INTO base_models (name, path, state, dtype, sha256, error, created_at, updated_at)"
                   " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)"
                   " ON CONFLICT (name) DO UPDATE SET"
                   " path = excluded.path, state = excluded.state, dtype = excluded.dtype,"
                   " sha256 = excluded.sha256, error = excluded.error, updated_at = excluded.updated_at"));
  upsert.bind(1, record.name)
      .bind(2, record.path)
      .bind(3, base_model_state_name(record.state))
      .bind(4, record.dtype)
      .bind(5, record.sha256)
      .bind(6, record.state == BaseModelState::kFailed ? record.error : std::string())
      .bind(7, now);
  LG_RETURN_IF_ERROR(upsert.run());
  LG_ASSIGN_OR_RETURN(BaseModelRecord stored, find_base_model(record.name));
  LG_RETURN_IF_ERROR(txn.commit());
  return stored;
}

Result<BaseModelRecord> SqliteRegistry::get_base_model(const std::string& name) {
  std::lock_guard lock(mu_);
  return find_base_model(name);
}

Result<std::vector<BaseModelRecord>> SqliteRegistry::list_base_models() {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q,
                      db_->prepare(std::string("SELECT ") + kBaseModelColumns + " FROM base_models ORDER BY name"));
  std::vector<BaseModelRecord> out;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) return out;
    LG_ASSIGN_OR_RETURN(BaseModelRecord r, read_base_model(q));
    out.push_back(std::move(r));
  }
}

Status SqliteRegistry::set_base_state(const std::string& name, BaseModelState state, const std::string& error) {
  if (state == BaseModelState::kServing) {
    return Status::invalid_argument("cannot set base model " + in_quotes(name) +
                                    " to serving directly: a base starts serving only through a swap "
                                    "(record_swap), which also moves the base serving now to previous");
  }
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  LG_ASSIGN_OR_RETURN(Statement update,
                      db_->prepare("UPDATE base_models SET state = ?2, error = ?3, updated_at = ?4 WHERE name = ?1"));
  update.bind(1, name)
      .bind(2, base_model_state_name(state))
      .bind(3, state == BaseModelState::kFailed ? error : std::string())
      .bind(4, unix_now());
  LG_RETURN_IF_ERROR(update.run());
  if (db_->changes() == 0) return Status::not_found("base model " + in_quotes(name) + " is not registered");
  return txn.commit();
}

Result<SwapRecord> SqliteRegistry::record_swap(const SwapRecord& swap) {
  LG_RETURN_IF_ERROR(validate(swap));
  const std::string doing = "cannot swap to base model " + in_quotes(swap.to_base);
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  auto target = find_base_model(swap.to_base);
  if (!target) return target.status().with_context(doing);
  switch (target->state) {
    case BaseModelState::kLoading:
    case BaseModelState::kFailed:
    case BaseModelState::kRetired:
      return Status::invalid_argument(doing + ": it is " + base_model_state_name(target->state) +
                                      " (only a candidate, previous or serving base can start serving)");
    case BaseModelState::kCandidate:
    case BaseModelState::kPrevious:
    case BaseModelState::kServing:
      break;
  }
  const int64_t now = unix_now();
  // Order matters: the previous base steps back before the serving one
  // takes its place, so exactly one base is previous afterwards.
  LG_ASSIGN_OR_RETURN(Statement demote, db_->prepare("UPDATE base_models SET state = ?3, updated_at = ?4"
                                                     " WHERE state = ?2 AND name != ?1"));
  demote.bind(1, swap.to_base)
      .bind(2, base_model_state_name(BaseModelState::kPrevious))
      .bind(3, base_model_state_name(BaseModelState::kCandidate))
      .bind(4, now);
  LG_RETURN_IF_ERROR(demote.run());
  demote.reset();
  demote.bind(1, swap.to_base)
      .bind(2, base_model_state_name(BaseModelState::kServing))
      .bind(3, base_model_state_name(BaseModelState::kPrevious))
      .bind(4, now);
  LG_RETURN_IF_ERROR(demote.run());
  if (target->state != BaseModelState::kServing) {
    LG_ASSIGN_OR_RETURN(Statement promote, db_->prepare("UPDATE base_models SET state = ?2, error = '',"
                                                        " updated_at = ?3 WHERE name = ?1"));
    promote.bind(1, swap.to_base).bind(2, base_model_state_name(BaseModelState::kServing)).bind(3, now);
    LG_RETURN_IF_ERROR(promote.run());
  }
  LG_ASSIGN_OR_RETURN(Statement insert,
                      db_->prepare("INSERT INTO base_swaps (at, actor, from_base, to_base, kind, forced, note)"
                                   " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
  insert.bind(1, now)
      .bind(2, swap.actor)
      .bind(3, swap.from_base)
      .bind(4, swap.to_base)
      .bind(5, swap.kind)
      .bind(6, int64_t{swap.forced ? 1 : 0})
      .bind(7, swap.note);
  LG_RETURN_IF_ERROR(insert.run());
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare(std::string("SELECT ") + kSwapColumns +
                                                " FROM base_swaps WHERE id = last_insert_rowid()"));
  LG_ASSIGN_OR_RETURN(const bool found, q.step());
  if (!found) return Status::internal(doing + ": the swap row vanished inside its own transaction");
  LG_ASSIGN_OR_RETURN(SwapRecord stored, read_swap(q));
  LG_RETURN_IF_ERROR(txn.commit());
  return stored;
}

Result<std::vector<SwapRecord>> SqliteRegistry::list_swaps(int64_t limit) {
  if (limit < 1) return Status::invalid_argument("list_swaps: limit " + std::to_string(limit) + " is not >= 1");
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare(std::string("SELECT ") + kSwapColumns +
                                                " FROM base_swaps ORDER BY id DESC LIMIT ?1"));
  q.bind(1, limit);
  std::vector<SwapRecord> out;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) return out;
    LG_ASSIGN_OR_RETURN(SwapRecord r, read_swap(q));
    out.push_back(std::move(r));
  }
}

// --- adapters -----------------------------------------------------------------

Result<AdapterRecord> SqliteRegistry::find_adapter(const std::string& name, const std::string& base_model) {
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare(std::string("SELECT ") + kAdapterColumns +
                                                " FROM adapters WHERE name = ?1 AND base_model = ?2"));
  q.bind(1, name).bind(2, base_model);
  LG_ASSIGN_OR_RETURN(const bool found, q.step());
  if (!found) {
    return Status::not_found("adapter " + in_quotes(name) + " not found on base model " + in_quotes(base_model));
  }
  return read_adapter(q);
}

Result<std::string> SqliteRegistry::other_bases_with_adapter(const std::string& name,
                                                             const std::string& base_model) {
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare("SELECT base_model FROM adapters WHERE name = ?1 AND base_model != ?2"
                                                " ORDER BY base_model"));
  q.bind(1, name).bind(2, base_model);
  std::string bases;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) return bases;
    if (!bases.empty()) bases += ", ";
    bases += in_quotes(q.column_text(0));
  }
}

Status SqliteRegistry::check_adapter_unused(const std::string& name, const std::string& base_model,
                                            const std::string& doing) {
  LG_RETURN_IF_ERROR(find_adapter(name, base_model).status());
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare("SELECT name FROM scenarios WHERE adapter = ?1 AND base_model = ?2"
                                                " ORDER BY name"));
  q.bind(1, name).bind(2, base_model);
  std::string users;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) break;
    if (!users.empty()) users += ", ";
    users += in_quotes(q.column_text(0));
  }
  if (users.empty()) return Status::ok();
  return Status::failed_precondition("cannot " + doing + " adapter " + in_quotes(name) + " on base model " +
                                  in_quotes(base_model) + ": scenario " + users +
                                  " uses it; point the scenario at another adapter or remove it first");
}

Result<AdapterRecord> SqliteRegistry::add_adapter(const AdapterRecord& record) {
  LG_RETURN_IF_ERROR(validate(record));
  const std::string doing =
      "cannot add adapter " + in_quotes(record.name) + " to base model " + in_quotes(record.base_model);
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  // Checked here for clear messages; the schema's keys are the backstop.
  auto base = find_base_model(record.base_model);
  if (!base) return base.status().with_context(doing);
  if (base->state == BaseModelState::kRetired || base->state == BaseModelState::kFailed) {
    return Status::invalid_argument(doing + ": the base model is " + base_model_state_name(base->state) +
                                    " and takes no new adapters");
  }
  auto existing = find_adapter(record.name, record.base_model);
  if (existing) {
    return Status::already_exists("adapter " + in_quotes(record.name) + " already exists on base model " +
                                    in_quotes(record.base_model));
  }
  if (existing.status().code() != StatusCode::kNotFound) return existing.status();
  const int64_t now = unix_now();
  LG_ASSIGN_OR_RETURN(Statement insert, db_->prepare(std::string("INSERT INTO adapters (") + kAdapterColumns +
                                                     ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)"));
  insert.bind(1, record.name)
      .bind(2, record.base_model)
      .bind(3, record.path)
      .bind(4, record.rank)
      .bind(5, record.alpha)
      .bind(6, nlohmann::json(record.target_modules).dump())
      .bind(7, record.sha256)
      .bind(8, record.size_bytes)
      .bind(9, adapter_state_name(record.state))
      .bind(10, now);
  LG_RETURN_IF_ERROR(insert.run());
  LG_ASSIGN_OR_RETURN(AdapterRecord stored, find_adapter(record.name, record.base_model));
  LG_RETURN_IF_ERROR(txn.commit());
  return stored;
}

Result<AdapterRecord> SqliteRegistry::get_adapter(const std::string& name, const std::string& base_model) {
  std::lock_guard lock(mu_);
  return find_adapter(name, base_model);
}

Result<std::vector<AdapterRecord>> SqliteRegistry::list_adapters(const std::string& base_model) {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q,
                      db_->prepare(std::string("SELECT ") + kAdapterColumns +
                                   " FROM adapters WHERE ?1 = '' OR base_model = ?1 ORDER BY base_model, name"));
  q.bind(1, base_model);
  std::vector<AdapterRecord> out;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) return out;
    LG_ASSIGN_OR_RETURN(AdapterRecord r, read_adapter(q));
    out.push_back(std::move(r));
  }
}

Status SqliteRegistry::set_adapter_state(const std::string& name, const std::string& base_model,
                                         AdapterState state) {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  if (state == AdapterState::kRemoving) {
    LG_RETURN_IF_ERROR(check_adapter_unused(name, base_model, "start removing"));
  }
  LG_ASSIGN_OR_RETURN(Statement update, db_->prepare("UPDATE adapters SET state = ?3, updated_at = ?4"
                                                     " WHERE name = ?1 AND base_model = ?2"));
  update.bind(1, name).bind(2, base_model).bind(3, adapter_state_name(state)).bind(4, unix_now());
  LG_RETURN_IF_ERROR(update.run());
  if (db_->changes() == 0) {
    return Status::not_found("adapter " + in_quotes(name) + " not found on base model " + in_quotes(base_model));
  }
  return txn.commit();
}

Status SqliteRegistry::remove_adapter(const std::string& name, const std::string& base_model) {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  LG_RETURN_IF_ERROR(check_adapter_unused(name, base_model, "remove"));
  LG_ASSIGN_OR_RETURN(Statement del, db_->prepare("DELETE FROM adapters WHERE name = ?1 AND base_model = ?2"));
  del.bind(1, name).bind(2, base_model);
  LG_RETURN_IF_ERROR(del.run());
  return txn.commit();
}

// --- scenarios ----------------------------------------------------------------

Result<ScenarioRecord> SqliteRegistry::set_scenario(const std::string& name, const std::string& base_model,
                                                    const std::string& adapter) {
  LG_RETURN_IF_ERROR(validate_name("scenario name", name, /*allow_slash=*/false));
  LG_RETURN_IF_ERROR(validate_name("base model name", base_model, /*allow_slash=*/true));
  LG_RETURN_IF_ERROR(validate_name("adapter name", adapter, /*allow_slash=*/false));
  const std::string doing = "cannot point scenario " + in_quotes(name) + " on base model " + in_quotes(base_model) +
                            " at adapter " + in_quotes(adapter);
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  auto target = find_adapter(adapter, base_model);
  if (!target) {
    if (target.status().code() != StatusCode::kNotFound) return target.status().with_context(doing);
    LG_ASSIGN_OR_RETURN(const std::string elsewhere, other_bases_with_adapter(adapter, base_model));
    if (elsewhere.empty()) return target.status().with_context(doing);
    return Status::not_found(doing + ": " + target.status().message() + " (an adapter of that name is on base model " +
                             elsewhere + "; a scenario uses an adapter of its own base)");
  }
  if (target->state != AdapterState::kReady) {
    return Status::invalid_argument(doing + ": the adapter is " + adapter_state_name(target->state) +
                                    ", not ready");
  }
  LG_ASSIGN_OR_RETURN(Statement upsert,
                      db_->prepare("INSERT INTO scenarios (name, base_model, adapter, created_at, updated_at)"
                                   " VALUES (?1, ?2, ?3, ?4, ?4)"
                                   " ON CONFLICT (name, base_model) DO UPDATE SET"
                                   " adapter = excluded.adapter, updated_at = excluded.updated_at"));
  upsert.bind(1, name).bind(2, base_model).bind(3, adapter).bind(4, unix_now());
  LG_RETURN_IF_ERROR(upsert.run());
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare(std::string("SELECT ") + kScenarioColumns +
                                                " FROM scenarios WHERE name = ?1 AND base_model = ?2"));
  q.bind(1, name).bind(2, base_model);
  LG_ASSIGN_OR_RETURN(const bool found, q.step());
  if (!found) return Status::internal("scenario " + in_quotes(name) + " vanished inside its own transaction");
  ScenarioRecord stored = read_scenario(q);
  LG_RETURN_IF_ERROR(txn.commit());
  return stored;
}

Status SqliteRegistry::remove_scenario(const std::string& name, const std::string& base_model) {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  LG_ASSIGN_OR_RETURN(Statement del, db_->prepare("DELETE FROM scenarios WHERE name = ?1 AND base_model = ?2"));
  del.bind(1, name).bind(2, base_model);
  LG_RETURN_IF_ERROR(del.run());
  if (db_->changes() == 0) {
    return Status::not_found("scenario " + in_quotes(name) + " not found on base model " + in_quotes(base_model));
  }
  return txn.commit();
}

Result<std::vector<ScenarioRecord>> SqliteRegistry::list_scenarios(const std::string& base_model) {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q,
                      db_->prepare(std::string("SELECT ") + kScenarioColumns +
                                   " FROM scenarios WHERE ?1 = '' OR base_model = ?1 ORDER BY base_model, name"));
  q.bind(1, base_model);
  std::vector<ScenarioRecord> out;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) return out;
    out.push_back(read_scenario(q));
  }
}

Result<std::string> SqliteRegistry::resolve_scenario(const std::string& name, const std::string& base_model) {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare("SELECT adapter FROM scenarios WHERE name = ?1 AND base_model = ?2"));
  q.bind(1, name).bind(2, base_model);
  LG_ASSIGN_OR_RETURN(const bool found, q.step());
  if (!found) {
    return Status::not_found("scenario " + in_quotes(name) + " not found on base model " + in_quotes(base_model));
  }
  return q.column_text(0);
}

// --- opening ------------------------------------------------------------------

// The text a one-row PRAGMA returns.
Result<std::string> pragma_text(SqliteDb& db, const std::string& pragma) {
  LG_ASSIGN_OR_RETURN(Statement q, db.prepare("PRAGMA " + pragma));
  LG_ASSIGN_OR_RETURN(const bool row, q.step());
  return row ? q.column_text(0) : std::string();
}

}  // namespace

// Everything here but the busy timeout is the first read of the file.
Status configure_registry_connection(SqliteDb& db) {
  LG_RETURN_IF_ERROR(db.exec("PRAGMA busy_timeout = " + std::to_string(kBusyTimeoutMs)));
  LG_ASSIGN_OR_RETURN(const std::string journal, pragma_text(db, "journal_mode = WAL"));
  if (journal != "wal" && db.path() != ":memory:") {
    return Status::io_error("cannot use write-ahead logging (journal_mode is " + in_quotes(journal) +
                            "); is the file on a network file system?");
  }
  // FULL, not NORMAL: with WAL, NORMAL can lose the last commits on a power
  // cut (never corrupting the file). Registry writes are rare admin calls
  // that the client was told succeeded, so they pay one fsync per commit.
  LG_RETURN_IF_ERROR(db.exec("PRAGMA synchronous = FULL"));
  LG_RETURN_IF_ERROR(db.exec("PRAGMA foreign_keys = ON"));
  LG_ASSIGN_OR_RETURN(const int64_t foreign_keys, db.query_int64("PRAGMA foreign_keys"));
  if (foreign_keys != 1) return Status::unsupported("this SQLite library does not enforce foreign keys");
  return Status::ok();
}

Result<std::unique_ptr<Registry>> Registry::open(const std::string& path) {
  LG_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> db, SqliteDb::open(path));
  LG_RETURN_IF_ERROR(configure_registry_connection(*db).with_context("cannot open registry " + in_quotes(path)));
  LG_RETURN_IF_ERROR(migrate(*db));
  return std::unique_ptr<Registry>(new SqliteRegistry(std::move(db)));
}

}  // namespace loragate
