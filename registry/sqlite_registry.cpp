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
constexpr const char* kBaseModelColumns = "name, path, state, created_at, updated_at";
constexpr const char* kScenarioColumns = "name, base_model, adapter, created_at, updated_at";

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

  Result<AdapterRecord> add_adapter(const AdapterRecord& record) override;
  Result<AdapterRecord> get_adapter(const std::string& name) override;
  Result<std::vector<AdapterRecord>> list_adapters(const std::string& base_model) override;
  Status set_adapter_state(const std::string& name, AdapterState state) override;
  Status remove_adapter(const std::string& name) override;

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

  // The queries behind the public calls; the caller holds mu_.
  Result<BaseModelRecord> find_base_model(const std::string& name);
  Result<AdapterRecord> find_adapter(const std::string& name);
  // not_found unless the adapter exists; invalid_argument naming every
  // scenario that uses it when there is one.
  Status check_adapter_unused(const std::string& name, const std::string& doing);

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
  r.created_at = row.column_int64(3);
  r.updated_at = row.column_int64(4);
  return r;
}

Result<AdapterRecord> SqliteRegistry::read_adapter(const Statement& row) const {
  AdapterRecord r;
  r.name = row.column_text(0);
  const std::string where = "registry " + in_quotes(db_->path()) + ": adapter " + in_quotes(r.name);
  r.base_model = row.column_text(1);
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
  LG_ASSIGN_OR_RETURN(Statement upsert,
                      db_->prepare("INSERT INTO base_models (name, path, state, created_at, updated_at)"
                                   " VALUES (?1, ?2, ?3, ?4, ?4)"
                                   " ON CONFLICT (name) DO UPDATE SET"
                                   " path = excluded.path, state = excluded.state, updated_at = excluded.updated_at"));
  upsert.bind(1, record.name).bind(2, record.path).bind(3, base_model_state_name(record.state)).bind(4, now);
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

// --- adapters -----------------------------------------------------------------

Result<AdapterRecord> SqliteRegistry::find_adapter(const std::string& name) {
  LG_ASSIGN_OR_RETURN(Statement q,
                      db_->prepare(std::string("SELECT ") + kAdapterColumns + " FROM adapters WHERE name = ?1"));
  q.bind(1, name);
  LG_ASSIGN_OR_RETURN(const bool found, q.step());
  if (!found) return Status::not_found("adapter " + in_quotes(name) + " not found");
  return read_adapter(q);
}

Status SqliteRegistry::check_adapter_unused(const std::string& name, const std::string& doing) {
  LG_RETURN_IF_ERROR(find_adapter(name).status());
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare("SELECT name, base_model FROM scenarios WHERE adapter = ?1"
                                                " ORDER BY base_model, name"));
  q.bind(1, name);
  std::string users;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) break;
    if (!users.empty()) users += ", ";
    users += in_quotes(q.column_text(0)) + " (base model " + in_quotes(q.column_text(1)) + ")";
  }
  if (users.empty()) return Status::ok();
  return Status::invalid_argument("cannot " + doing + " adapter " + in_quotes(name) + ": scenario " + users +
                                  " uses it; point the scenario at another adapter or remove it first");
}

Result<AdapterRecord> SqliteRegistry::add_adapter(const AdapterRecord& record) {
  LG_RETURN_IF_ERROR(validate(record));
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  // Checked here for clear messages; the schema's keys are the backstop.
  auto existing = find_adapter(record.name);
  if (existing) return Status::invalid_argument("adapter " + in_quotes(record.name) + " already exists");
  if (existing.status().code() != StatusCode::kNotFound) return existing.status();
  LG_RETURN_IF_ERROR(find_base_model(record.base_model)
                         .status()
                         .with_context("cannot add adapter " + in_quotes(record.name)));
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
  LG_ASSIGN_OR_RETURN(AdapterRecord stored, find_adapter(record.name));
  LG_RETURN_IF_ERROR(txn.commit());
  return stored;
}

Result<AdapterRecord> SqliteRegistry::get_adapter(const std::string& name) {
  std::lock_guard lock(mu_);
  return find_adapter(name);
}

Result<std::vector<AdapterRecord>> SqliteRegistry::list_adapters(const std::string& base_model) {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare(std::string("SELECT ") + kAdapterColumns +
                                                " FROM adapters WHERE ?1 = '' OR base_model = ?1 ORDER BY name"));
  q.bind(1, base_model);
  std::vector<AdapterRecord> out;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) return out;
    LG_ASSIGN_OR_RETURN(AdapterRecord r, read_adapter(q));
    out.push_back(std::move(r));
  }
}

Status SqliteRegistry::set_adapter_state(const std::string& name, AdapterState state) {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  if (state == AdapterState::kRemoving) {
    LG_RETURN_IF_ERROR(check_adapter_unused(name, "start removing"));
  }
  LG_ASSIGN_OR_RETURN(Statement update,
                      db_->prepare("UPDATE adapters SET state = ?2, updated_at = ?3 WHERE name = ?1"));
  update.bind(1, name).bind(2, adapter_state_name(state)).bind(3, unix_now());
  LG_RETURN_IF_ERROR(update.run());
  if (db_->changes() == 0) return Status::not_found("adapter " + in_quotes(name) + " not found");
  return txn.commit();
}

Status SqliteRegistry::remove_adapter(const std::string& name) {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  LG_RETURN_IF_ERROR(check_adapter_unused(name, "remove"));
  LG_ASSIGN_OR_RETURN(Statement del, db_->prepare("DELETE FROM adapters WHERE name = ?1"));
  del.bind(1, name);
  LG_RETURN_IF_ERROR(del.run());
  return txn.commit();
}

// --- scenarios ----------------------------------------------------------------

Result<ScenarioRecord> SqliteRegistry::set_scenario(const std::string& name, const std::string& base_model,
                                                    const std::string& adapter) {
  LG_RETURN_IF_ERROR(validate_name("scenario name", name, /*allow_slash=*/false));
  LG_RETURN_IF_ERROR(validate_name("base model name", base_model, /*allow_slash=*/true));
  LG_RETURN_IF_ERROR(validate_name("adapter name", adapter, /*allow_slash=*/false));
  const std::string doing = "cannot point scenario " + in_quotes(name) + " at adapter " + in_quotes(adapter);
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  auto target = find_adapter(adapter);
  if (!target) return target.status().with_context(doing);
  if (target->base_model != base_model) {
    return Status::invalid_argument(doing + ": the adapter belongs to base model " + in_quotes(target->base_model) +
                                    ", not " + in_quotes(base_model));
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

// Sets the connection up: everything here but the busy timeout is the first
// read of the file, so a non-database fails here, as corrupt.
Status configure(SqliteDb& db) {
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

}  // namespace

Result<std::unique_ptr<Registry>> Registry::open(const std::string& path) {
  LG_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> db, SqliteDb::open(path));
  LG_RETURN_IF_ERROR(configure(*db).with_context("cannot open registry " + in_quotes(path)));
  LG_RETURN_IF_ERROR(migrate(*db));
  return std::unique_ptr<Registry>(new SqliteRegistry(std::move(db)));
}

}  // namespace loragate
