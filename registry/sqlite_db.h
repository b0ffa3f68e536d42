// SqliteDb: one RAII SQLite connection; Statement: one RAII prepared
// statement on it; Transaction: a scoped BEGIN IMMEDIATE ... COMMIT.
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

struct sqlite3;
struct sqlite3_stmt;

namespace loragate {

class SqliteDb;

class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Binds parameter `index` (1-based, as in SQL's ?1). A failed bind is kept
  // and returned by the next step()/run(), so binds can be chained.
  Statement& bind(int index, int64_t value);
  Statement& bind(int index, int value) { return bind(index, int64_t{value}); }
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view text);
  Statement& bind(int index, const char* text) { return bind(index, std::string_view(text)); }
  Statement& bind_null(int index);

  // Runs one step: true when a row is ready to be read with column_*(),
  // false when the statement is done.
  Result<bool> step();
  // Steps until done, ignoring any rows (INSERT, UPDATE, DELETE, DDL).
  Status run();
  // Rewinds the statement and clears its bindings for another use.
  void reset();

  // Columns of the current row (0-based). NULL reads as 0 / 0.0 / "".
  int64_t column_int64(int index) const;
  double column_double(int index) const;
  std::string column_text(int index) const;
  bool column_is_null(int index) const;

  // The statement's SQL as written.
  std::string sql() const;

 private:
  friend class SqliteDb;
  Statement(SqliteDb* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  void note_bind(int rc, int index);

  SqliteDb* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  Status bind_error_;  // first failed bind since the last reset
};

class SqliteDb {
 public:
  // Opens (creating it when absent) the database file at `path`, read-write.
  // SQLite opens lazily: a file that is not a database is only noticed by the
  // first statement, which then fails with Status::corrupt.
  static Result<std::unique_ptr<SqliteDb>> open(const std::string& path);

  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;
  ~SqliteDb();

  // Runs one or more ';'-separated statements that return no rows needed.
  Status exec(std::string_view sql);
  // Compiles one statement.
  Result<Statement> prepare(std::string_view sql);
  // The single integer a query like "PRAGMA user_version" returns.
  Result<int64_t> query_int64(std::string_view sql);

  // Rows changed by the last INSERT, UPDATE or DELETE.
  int64_t changes() const;
  // Rows changed by every statement of this connection since it opened.
  int64_t total_changes() const;
  // Whether a transaction is open on this connection.
  bool in_transaction() const;
  const std::string& path() const { return path_; }
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

// A write transaction: BEGIN IMMEDIATE on begin(), ROLLBACK on destruction
// unless commit() succeeded. IMMEDIATE takes the write lock up front, so two
// connections never deadlock upgrading a read lock to a write lock; the busy
// timeout makes the second one wait. Borrows the SqliteDb.
class Transaction {
 public:
  static Result<Transaction> begin(SqliteDb& db);

  Transaction(Transaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  // Commits; on failure the transaction is rolled back by the destructor.
  Status commit();

 private:
  explicit Transaction(SqliteDb* db) : db_(db) {}

  SqliteDb* db_ = nullptr;  // null once committed or moved from
};

}  // namespace loragate
