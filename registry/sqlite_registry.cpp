// SqliteRegistry's row readers and the opening of a registry file (PRAGMAs,
// migrations); the class itself is in sqlite_registry.h.
#include <chrono>
#include <mutex>
#include <utility>

#include <nlohmann/json.hpp>

#include "registry/registry.h"
#include "registry/schema.h"
#include "registry/sqlite_db.h"
#include "registry/sqlite_registry.h"

namespace loragate {
namespace registry_detail {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string in_quotes(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.append(1, '\'').append(s).append(1, '\'');
  return out;
}

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

}  // namespace registry_detail

namespace {

// How long a write waits for another connection's (or process's) lock
// before giving up with resource_exhausted.
constexpr int kBusyTimeoutMs = 5000;

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
    return Status::io_error("cannot use write-ahead logging (journal_mode is " + registry_detail::in_quotes(journal) +
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
  LG_RETURN_IF_ERROR(
      configure_registry_connection(*db).with_context("cannot open registry " + registry_detail::in_quotes(path)));
  LG_RETURN_IF_ERROR(migrate(*db));
  return std::unique_ptr<Registry>(new registry_detail::SqliteRegistry(std::move(db)));
}

}  // namespace loragate
