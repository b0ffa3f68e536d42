#include "registry/sqlite_db.h"

#include <sqlite3.h>

#include <memory>
#include <utility>

namespace loragate {
namespace {

Status status_for(int rc, std::string message) {
  switch (rc & 0xff) {  // the primary code of an extended result code
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return Status::corrupt(std::move(message));
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return Status::io_error(std::move(message));
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::resource_exhausted(std::move(message));
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_TOOBIG:
      return Status::invalid_argument(std::move(message));
    default:
      return Status::internal(std::move(message));
  }
}

// --- the cursor ---------------------------------------------------------------

// One prepared sqlite3_stmt; finalized on destruction.
class SqliteCursor final : public SqlCursor {
 public:
  SqliteCursor(const SqliteDb* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~SqliteCursor() override { sqlite3_finalize(stmt_); }
  SqliteCursor(const SqliteCursor&) = delete;
  SqliteCursor& operator=(const SqliteCursor&) = delete;

  void bind_int64(int index, int64_t value) override { note_bind(sqlite3_bind_int64(stmt_, index, value), index); }
  void bind_double(int index, double value) override { note_bind(sqlite3_bind_double(stmt_, index, value), index); }
  void bind_text(int index, std::string_view text) override {
    // SQLITE_TRANSIENT: SQLite copies the bytes, so `text` may die after this.
    note_bind(sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8), index);
  }
  void bind_null(int index) override { note_bind(sqlite3_bind_null(stmt_, index), index); }

  Result<bool> step() override {
    if (!bind_error_.is_ok()) return bind_error_;
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return db_->error(rc, "running a statement", sql());
  }

  void reset() override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    bind_error_ = Status::ok();
  }

  int64_t column_int64(int index) const override { return sqlite3_column_int64(stmt_, index); }
  double column_double(int index) const override { return sqlite3_column_double(stmt_, index); }
  std::string column_text(int index) const override {
    const auto* text = sqlite3_column_text(stmt_, index);  // before _bytes, as SQLite asks
    const int size = sqlite3_column_bytes(stmt_, index);
    return text ? std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(size)) : std::string();
  }
  bool column_is_null(int index) const override { return sqlite3_column_type(stmt_, index) == SQLITE_NULL; }

  std::string sql() const override {
    const char* text = stmt_ ? sqlite3_sql(stmt_) : nullptr;
    return text ? text : "";
  }

 private:
  void note_bind(int rc, int index) {
    if (rc != SQLITE_OK && bind_error_.is_ok()) {
      bind_error_ = db_->error(rc, "binding parameter " + std::to_string(index), sql());
    }
  }

  const SqliteDb* db_;
  sqlite3_stmt* stmt_;
  Status bind_error_;  // first failed bind since the last reset
};

}  // namespace

// --- SqliteDb -----------------------------------------------------------------

Result<std::unique_ptr<SqliteDb>> SqliteDb::open(const std::string& path) {
  sqlite3* raw = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  // SQLite hands back a handle even when the open fails; it must be closed.
  std::unique_ptr<SqliteDb> db(new SqliteDb(raw, path));
  if (raw == nullptr) return Status::resource_exhausted("sqlite '" + path + "': out of memory opening it");
  if (rc != SQLITE_OK) return db->error(rc, "opening the database");
  sqlite3_extended_result_codes(raw, 1);
  return db;
}

SqliteDb::~SqliteDb() { sqlite3_close_v2(db_); }

Status SqliteDb::error(int rc, std::string_view what, std::string_view sql) const {
  std::string message = "sqlite '" + path_ + "': " + std::string(what) + ": ";
  // sqlite3_errmsg describes the connection's last error; when that is not
  // `rc` (a bind error, say), fall back to the generic text for the code.
  const bool matches = db_ != nullptr && (sqlite3_extended_errcode(db_) & 0xff) == (rc & 0xff);
  message += matches ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  message += " [" + std::to_string(rc) + "]";
  if (!sql.empty()) message += " (sql: " + std::string(sql) + ")";
  return status_for(rc, std::move(message));
}

Status SqliteDb::exec(std::string_view sql) {
  const std::string text(sql);  // sqlite3_exec wants a terminated string
  const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, nullptr);
  if (rc == SQLITE_OK) return Status::ok();
  return error(rc, "running", text);
}

Result<Statement> SqliteDb::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  auto cursor = std::make_unique<SqliteCursor>(this, stmt);  // finalizes stmt on every path
  if (rc != SQLITE_OK) return error(rc, "preparing a statement", sql);
  if (stmt == nullptr) return Status::invalid_argument("sqlite '" + path_ + "': no statement in: " + std::string(sql));
  return Statement(std::move(cursor));
}

int64_t SqliteDb::changes() const { return sqlite3_changes64(db_); }
int64_t SqliteDb::total_changes() const { return sqlite3_total_changes64(db_); }

bool SqliteDb::in_transaction() const { return sqlite3_get_autocommit(db_) == 0; }

// --- transactions -------------------------------------------------------------

Status SqliteDb::begin_write() { return exec("BEGIN IMMEDIATE"); }
Status SqliteDb::commit() { return exec("COMMIT"); }
void SqliteDb::rollback() {
  if (in_transaction()) (void)exec("ROLLBACK");
}

}  // namespace loragate
