// The SQL the registry runs, apart from the database that runs it: an
// abstract connection (SqlConnection), a prepared statement over a backend's
// cursor (Statement), and a scoped write transaction (Transaction). SqliteDb
// (sqlite_db.h) and PgConnection (pg_connection.h) implement it, so the
// registry's queries (sql_registry*.cpp, evaluation_store.cpp,
// upgrade_store.cpp) are written once. The SQL they share is the common
// dialect of SQLite >= 3.35 and PostgreSQL: ?N placeholders, ON CONFLICT ...
// DO UPDATE, INSERT ... RETURNING.
//
// Ownership: the caller owns the connection; Statements and Transactions
// borrow it and must not outlive it. All are move-only resource owners.
//
// Thread-safety: none. A connection and everything made from it are used by
// one thread at a time; the owner serialises (the registry holds a mutex).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace loragate {

// One statement's cursor in a backend: what Statement forwards to.
class SqlCursor {
 public:
  virtual ~SqlCursor() = default;
  // A failed bind is kept and returned by the next step().
  virtual void bind_int64(int index, int64_t value) = 0;
  virtual void bind_double(int index, double value) = 0;
  virtual void bind_text(int index, std::string_view text) = 0;
  virtual void bind_null(int index) = 0;
  virtual Result<bool> step() = 0;
  virtual void reset() = 0;
  virtual int64_t column_int64(int index) const = 0;
  virtual double column_double(int index) const = 0;
  virtual std::string column_text(int index) const = 0;
  virtual bool column_is_null(int index) const = 0;
  virtual std::string sql() const = 0;
};

class Statement {
 public:
  explicit Statement(std::unique_ptr<SqlCursor> cursor) : cursor_(std::move(cursor)) {}
  Statement(Statement&&) noexcept = default;
  Statement& operator=(Statement&&) noexcept = default;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() = default;

  // Binds parameter `index` (1-based, as in SQL's ?1). A failed bind is kept
  // and returned by the next step()/run(), so binds can be chained.
  Statement& bind(int index, int64_t value) { return cursor_->bind_int64(index, value), *this; }
  Statement& bind(int index, int value) { return bind(index, int64_t{value}); }
  Statement& bind(int index, double value) { return cursor_->bind_double(index, value), *this; }
  Statement& bind(int index, std::string_view text) { return cursor_->bind_text(index, text), *this; }
  Statement& bind(int index, const char* text) { return bind(index, std::string_view(text)); }
  Statement& bind_null(int index) { return cursor_->bind_null(index), *this; }

  // Runs one step: true when a row is ready to be read with column_*(),
  // false when the statement is done.
  Result<bool> step() { return cursor_->step(); }
  // Steps until done, ignoring any rows (INSERT, UPDATE, DELETE, DDL).
  Status run();
  // Rewinds the statement and clears its bindings for another use.
  void reset() { cursor_->reset(); }

  // Columns of the current row (0-based). NULL reads as 0 / 0.0 / "".
  int64_t column_int64(int index) const { return cursor_->column_int64(index); }
  double column_double(int index) const { return cursor_->column_double(index); }
  std::string column_text(int index) const { return cursor_->column_text(index); }
  bool column_is_null(int index) const { return cursor_->column_is_null(index); }

  // The statement's SQL as written.
  std::string sql() const { return cursor_ ? cursor_->sql() : std::string(); }

 private:
  std::unique_ptr<SqlCursor> cursor_;
};

class SqlConnection {
 public:
  SqlConnection() = default;
  SqlConnection(const SqlConnection&) = delete;
  SqlConnection& operator=(const SqlConnection&) = delete;
  virtual ~SqlConnection() = default;

  // Runs one or more ';'-separated statements that take no parameters and
  // return no rows needed.
  virtual Status exec(std::string_view sql) = 0;
  // Compiles (SQLite) or records (PostgreSQL) one statement.
  virtual Result<Statement> prepare(std::string_view sql) = 0;
  // The single integer the first row of `sql` holds in its first column.
  Result<int64_t> query_int64(std::string_view sql);

  // Rows changed by the last INSERT, UPDATE or DELETE.
  virtual int64_t changes() const = 0;
  // Whether a transaction is open on this connection.
  virtual bool in_transaction() const = 0;
  // The database as messages name it: the SQLite file's path, or
  // "postgresql://host:port/dbname" (never a password).
  virtual const std::string& path() const = 0;

  // Opens a write transaction that serialises with every other writer of
  // the same database (SQLite: BEGIN IMMEDIATE; PostgreSQL: BEGIN and a
  // transaction-scoped advisory lock), so check-then-write stays correct.
  virtual Status begin_write() = 0;
  virtual Status commit() = 0;
  // Rolls back the open transaction, if any; errors are ignored (the
  // connection may be gone, which ends the transaction too).
  virtual void rollback() = 0;
  // Inside a write transaction: tells the registry's listeners, once the
  // transaction commits, that what a replica serves may have changed
  // (PostgreSQL: NOTIFY loragate_registry). SQLite has no listeners: no-op.
  virtual Status notify_change() = 0;
};

// A write transaction: begin_write() on begin(), rollback() on destruction
// unless commit() succeeded. Borrows the connection.
class Transaction {
 public:
  static Result<Transaction> begin(SqlConnection& db);

  Transaction(Transaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  // Commits; on failure the transaction is rolled back by the destructor.
  Status commit();

 private:
  explicit Transaction(SqlConnection* db) : db_(db) {}

  SqlConnection* db_ = nullptr;  // null once committed or moved from
};

}  // namespace loragate
