// SqliteDb: one RAII SQLite connection, the SQLite side of SqlConnection
// (sql_connection.h: Statement, Transaction); its transactions are BEGIN
// IMMEDIATE ... COMMIT.
//
// Errors come back as Status values whose message names the database file,
// what was being done, SQLite's own error text and, where there is one, the
// SQL. SQLite result codes map to Status codes: NOTADB/CORRUPT -> corrupt,
// CANTOPEN/IOERR/FULL/READONLY/PERM -> io_error, BUSY/LOCKED ->
// resource_exhausted, CONSTRAINT/MISMATCH/RANGE/TOOBIG -> invalid_argument,
// anything else -> internal.
//
// Ownership: the caller owns the SqliteDb; Statements and Transactions borrow
// it and must not outlive it. All three are move-only resource owners.
//
// Thread-safety: none. The connection is opened with SQLITE_OPEN_NOMUTEX, so
// a SqliteDb and everything made from it must be used by one thread at a
// time; the owner serialises (Registry holds a mutex). Separate SqliteDb
// objects on the same file may be used from different threads or processes:
// SQLite's file locks and the busy timeout arbitrate between them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "registry/sql_connection.h"

struct sqlite3;

namespace loragate {

class SqliteDb final : public SqlConnection {
 public:
  // Opens (creating it when absent) the database file at `path`, read-write.
  // SQLite opens lazily: a file that is not a database is only noticed by the
  // first statement, which then fails with Status::corrupt.
  static Result<std::unique_ptr<SqliteDb>> open(const std::string& path);

  ~SqliteDb() override;

  Status exec(std::string_view sql) override;
  Result<Statement> prepare(std::string_view sql) override;
  int64_t changes() const override;
  bool in_transaction() const override;
  const std::string& path() const override { return path_; }
  // BEGIN IMMEDIATE: takes the write lock up front, so two connections never
  // deadlock upgrading a read lock to a write lock; the busy timeout makes
  // the second one wait.
  Status begin_write() override;
  Status commit() override;
  void rollback() override;
  Status notify_change() override { return Status::ok(); }

  // Rows changed by every statement of this connection since it opened.
  int64_t total_changes() const;
  // The raw handle, for what this wrapper does not cover.
  sqlite3* handle() { return db_; }

  // A Status for SQLite result code `rc` while doing `what` (with optional
  // `sql`): "sqlite '<path>': <what>: <sqlite message> [<code>] (sql: ...)".
  Status error(int rc, std::string_view what, std::string_view sql = {}) const;

 private:
  SqliteDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_ = nullptr;
  std::string path_;
};

}  // namespace loragate
