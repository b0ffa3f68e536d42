// PgConnection: the PostgreSQL side of SqlConnection (sql_connection.h), over
// libpq. A Statement's SQL is recorded at prepare() with its ?N placeholders
// turned into $N; the first step() runs it (PQexecParams, parameters and
// results as text) and later steps walk its rows. A write transaction is
// BEGIN plus pg_advisory_xact_lock(kPgRegistryLockKey): registry writers on
// every replica take turns, as SQLite's BEGIN IMMEDIATE makes them, so the
// registry's check-then-write logic holds across processes.
//
// Connection loss: a statement on a lost connection fails with io_error
// naming the server (host:port/dbname, never the password); the next call
// outside a transaction connects again, so a registry recovers when the
// server does. Connecting gives up after connect_timeout (3 s unless the URL
// says otherwise) and every statement after statement_timeout (15 s), so no
// call hangs forever. SQLSTATE classes map to Status codes: 23 (integrity)
// and 22 (data) -> invalid_argument; 08 (connection), 57P (shutdown), 58
// (system) -> io_error; 40001, 40P01, 55P03, 57014 and 53 (resources) ->
// resource_exhausted; XX001/XX002 -> corrupt; anything else -> internal.
//
// Thread-safety: none (sql_connection.h); the owner serialises.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "registry/sql_connection.h"

struct pg_conn;
struct pg_result;

namespace loragate {

// The advisory lock every registry write transaction takes ("LGRG").
inline constexpr int64_t kPgRegistryLockKey = 0x4C475247;
// The channel registry writes NOTIFY (pg_listener.h listens).
inline constexpr const char* kPgRegistryChannel = "loragate_registry";

// How a URL names its server in messages: "postgresql://host:port/dbname".
std::string pg_display_name(const std::string& url);
// A new libpq connection to `url` with loragate's settings (connect_timeout,
// keepalives, statement_timeout, UTF8, notices silenced); the caller owns it
// (PQfinish). Errors are io_error naming `display`.
Result<pg_conn*> pg_connect(const std::string& url, const std::string& display);

class PgConnection final : public SqlConnection {
 public:
  // Connects to the database of libpq URI `url`.
  static Result<std::unique_ptr<PgConnection>> open(const std::string& url);
  ~PgConnection() override;

  Status exec(std::string_view sql) override;
  Result<Statement> prepare(std::string_view sql) override;
  int64_t changes() const override { return changes_; }
  bool in_transaction() const override;
  const std::string& path() const override { return display_; }
  Status begin_write() override;
  Status commit() override;
  void rollback() override;
  Status notify_change() override;

  // For the cursor: runs `sql` ($N placeholders) with text `params` (null
  // = SQL NULL). Returns the owned result (PQclear) or the error.
  Result<pg_result*> execute(const std::string& sql, const std::vector<const char*>& params, std::string_view what);

 private:
  PgConnection(std::string url, std::string display, pg_conn* conn)
      : url_(std::move(url)), display_(std::move(display)), conn_(conn) {}
  // Connects again when the connection was lost, unless a transaction was
  // open on it (its work is gone: that transaction must fail).
  Status ensure_connected();
  // Checks `res` (taking ownership): ok for COMMAND_OK / TUPLES_OK.
  Result<pg_result*> check(pg_result* res, std::string_view what, std::string_view sql);

  std::string url_, display_;
  pg_conn* conn_ = nullptr;
  bool in_write_ = false;  // between begin_write and commit/rollback
  int64_t changes_ = 0;
};

}  // namespace loragate
