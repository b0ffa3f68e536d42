#include "registry/registry_connection.h"

#include <chrono>
#include <string_view>
#include <thread>
#include <utility>

#include "registry/pg_connection.h"
#include "registry/pg_schema.h"
#include "registry/registry.h"
#include "registry/schema.h"
#include "registry/sqlite_db.h"

namespace loragate {
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

// Switching a fresh file to WAL needs an exclusive lock taken while holding a shared one, so
// SQLite answers "locked" at once instead of calling the busy handler (that wait could
// deadlock). Two processes opening a new registry together meet exactly that: retry for as
// long as the busy timeout would have waited.
Result<std::string> switch_to_wal(SqliteDb& db) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (;;) {
    Result<std::string> journal = pragma_text(db, "journal_mode = WAL");
    if (journal.is_ok() || journal.status().code() != StatusCode::kResourceExhausted ||
        std::chrono::steady_clock::now() >= deadline) {
      return journal;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

bool is_postgres_url(std::string_view path) {
  return path.starts_with("postgresql://") || path.starts_with("postgres://");
}

std::string registry_display_name(const std::string& path) {
  return is_postgres_url(path) ? pg_display_name(path) : path;
}

// Everything here but the busy timeout is the first read of the file.
Status configure_registry_connection(SqliteDb& db) {
  LG_RETURN_IF_ERROR(db.exec("PRAGMA busy_timeout = " + std::to_string(kBusyTimeoutMs)));
  LG_ASSIGN_OR_RETURN(const std::string journal, switch_to_wal(db));
  if (journal != "wal" && db.path() != ":memory:") {
    return Status::io_error("cannot use write-ahead logging (journal_mode is '" + journal +
                            "'); is the file on a network file system?");
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

Result<std::unique_ptr<SqlConnection>> open_registry_connection(const std::string& path) {
  if (is_postgres_url(path)) {
    LG_ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> db, PgConnection::open(path));
    LG_RETURN_IF_ERROR(pg_migrate(*db));
    return std::unique_ptr<SqlConnection>(std::move(db));
  }
  LG_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> db, SqliteDb::open(path));
  LG_RETURN_IF_ERROR(configure_registry_connection(*db).with_context("cannot open registry '" + path + "'"));
  LG_RETURN_IF_ERROR(migrate(*db));
  return std::unique_ptr<SqlConnection>(std::move(db));
}

}  // namespace loragate
