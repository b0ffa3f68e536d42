#include "registry/pg_connection.h"

#include <libpq-fe.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>

namespace loragate {
namespace {

// How long connecting may take unless the URL says (libpq's connect_timeout).
constexpr const char* kPgConnectTimeoutS = "3";
// The longest one statement may run, lock waits included.
constexpr const char* kPgStatementTimeoutMs = "15000";

std::string pg_trimmed(const char* text) {
  std::string s = text != nullptr ? text : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

Status pg_status_for_sqlstate(std::string_view state, std::string message) {
  const std::string_view cls = state.substr(0, 2);
  if (cls == "23" || cls == "22") return Status::invalid_argument(std::move(message));
  if (state == "40001" || state == "40P01" || state == "55P03" || state == "57014" || cls == "53") {
    return Status::resource_exhausted(std::move(message));
  }
  if (cls == "08" || state.starts_with("57P") || cls == "58" || state.empty()) {
    // No SQLSTATE: libpq lost the server. Transient: admin writes answer 503 and the next call reconnects.
    return Status::unavailable(std::move(message));
  }
  if (state == "XX001" || state == "XX002") return Status::corrupt(std::move(message));
  return Status::internal(std::move(message));
}

// ?N -> $N outside quotes and comments; the highest N, or an error for a bare '?'.
Result<std::pair<std::string, int>> pg_translate_placeholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size());
  int highest = 0;
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (c == '\'' || c == '"') {  // a literal or identifier; doubled quotes stay inside
      const size_t end = sql.find(c, i + 1);
      const size_t stop = end == std::string_view::npos ? sql.size() : end + 1;
      out.append(sql.substr(i, stop - i));
      i = stop - 1;
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      const size_t end = sql.find('\n', i);
      const size_t stop = end == std::string_view::npos ? sql.size() : end;
      out.append(sql.substr(i, stop - i));
      i = stop - 1;
    } else if (c == '?') {
      size_t j = i + 1;
      int n = 0;
      while (j < sql.size() && sql[j] >= '0' && sql[j] <= '9' && n < 100000) n = n * 10 + (sql[j++] - '0');
      if (j == i + 1) return Status::invalid_argument("a bare '?' placeholder (number it: ?1) in: " + std::string(sql));
      out.append(1, '$').append(sql.substr(i + 1, j - i - 1));
      highest = std::max(highest, n);
      i = j - 1;
    } else {
      out.push_back(c);
    }
  }
  return std::pair<std::string, int>(std::move(out), highest);
}

// One statement: its translated SQL, its text parameters, and once run its result.
class PgCursor final : public SqlCursor {
 public:
  PgCursor(PgConnection* db, std::string written, std::string translated, int params)
      : db_(db), written_(std::move(written)), translated_(std::move(translated)),
        values_(static_cast<size_t>(params)) {}
  ~PgCursor() override { PQclear(res_); }
  PgCursor(const PgCursor&) = delete;
  PgCursor& operator=(const PgCursor&) = delete;

  void bind_int64(int index, int64_t value) override { set(index, std::to_string(value)); }
  void bind_double(int index, double value) override {
    char text[40];
    std::snprintf(text, sizeof text, "%.17g", value);  // round-trips every double
    set(index, text);
  }
  void bind_text(int index, std::string_view text) override { set(index, std::string(text)); }
  void bind_null(int index) override { set(index, std::nullopt); }

  Result<bool> step() override {
    if (!bind_error_.is_ok()) return bind_error_;
    if (res_ == nullptr) {
      std::vector<const char*> params;
      params.reserve(values_.size());
      for (const auto& v : values_) params.push_back(v ? v->c_str() : nullptr);
      LG_ASSIGN_OR_RETURN(res_, db_->execute(translated_, params, "running a statement"));
      row_ = -1;
    }
    if (row_ < PQntuples(res_)) ++row_;
    return row_ < PQntuples(res_);
  }

  void reset() override {
    PQclear(res_);
    res_ = nullptr;
    row_ = -1;
    for (auto& v : values_) v.reset();
    bind_error_ = Status::ok();
  }

  int64_t column_int64(int index) const override {
    const char* v = value(index);
    return v != nullptr ? std::strtoll(v, nullptr, 10) : 0;
  }
  double column_double(int index) const override {
    const char* v = value(index);
    return v != nullptr ? std::strtod(v, nullptr) : 0.0;
  }
  std::string column_text(int index) const override {
    const char* v = value(index);
    return v != nullptr ? std::string(v, static_cast<size_t>(PQgetlength(res_, row_, index))) : std::string();
  }
  bool column_is_null(int index) const override { return value(index) == nullptr; }
  std::string sql() const override { return written_; }

 private:
  void set(int index, std::optional<std::string> value) {
    if (index < 1 || index > static_cast<int>(values_.size())) {
      if (bind_error_.is_ok()) {
        bind_error_ = Status::invalid_argument("'" + db_->path() + "': binding parameter " + std::to_string(index) +
                                               ": the statement has " + std::to_string(values_.size()) +
                                               " (sql: " + written_ + ")");
      }
      return;
    }
    values_[static_cast<size_t>(index - 1)] = std::move(value);
  }
  // The current row's column `index`, or null (SQL NULL, or no such cell).
  const char* value(int index) const {
    if (res_ == nullptr || row_ < 0 || row_ >= PQntuples(res_) || index < 0 || index >= PQnfields(res_)) {
      return nullptr;
    }
    return PQgetisnull(res_, row_, index) ? nullptr : PQgetvalue(res_, row_, index);
  }

  PgConnection* db_;
  std::string written_, translated_;
  std::vector<std::optional<std::string>> values_;
  PGresult* res_ = nullptr;
  int row_ = -1;
  Status bind_error_;
};

}  // namespace

std::string pg_display_name(const std::string& url) {
  char* err = nullptr;
  PQconninfoOption* options = PQconninfoParse(url.c_str(), &err);
  PQfreemem(err);
  if (options == nullptr) return "postgresql://(an unreadable URL)";
  std::string host, port, dbname, user;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    const std::string key = o->keyword;
    const std::string val = o->val != nullptr ? o->val : "";
    if (key == "host" || (key == "hostaddr" && host.empty())) host = val;
    if (key == "port") port = val;
    if (key == "dbname") dbname = val;
    if (key == "user") user = val;
  }
  PQconninfoFree(options);
  return "postgresql://" + (host.empty() ? std::string("localhost") : host) + ":" +
         (port.empty() ? std::string("5432") : port) + "/" + (dbname.empty() ? user : dbname);
}

Result<pg_conn*> pg_connect(const std::string& url, const std::string& display) {
  char* err = nullptr;
  PQconninfoOption* options = PQconninfoParse(url.c_str(), &err);
  if (options == nullptr) {
    const std::string why = err != nullptr ? pg_trimmed(err) : "out of memory";
    PQfreemem(err);
    return Status::invalid_argument("registry '" + display + "': not a PostgreSQL connection URL: " + why);
  }
  std::vector<std::string> keys, values;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr || *o->val == '\0') continue;
    keys.emplace_back(o->keyword);
    values.emplace_back(o->val);
  }
  PQconninfoFree(options);
  auto set_default = [&](const char* key, const char* value) {
    for (const std::string& k : keys) {
      if (k == key) return;
    }
    keys.emplace_back(key);
    values.emplace_back(value);
  };
  set_default("connect_timeout", kPgConnectTimeoutS);
  set_default("client_encoding", "UTF8");
  set_default("application_name", "loragate");
  // A server that vanished (not just stopped) is noticed in ~25 s, not hours.
  set_default("keepalives_idle", "10");
  set_default("keepalives_interval", "5");
  set_default("keepalives_count", "3");
  std::vector<const char*> key_ptrs, value_ptrs;
  for (size_t i = 0; i < keys.size(); ++i) {
    key_ptrs.push_back(keys[i].c_str());
    value_ptrs.push_back(values[i].c_str());
  }
  key_ptrs.push_back(nullptr);
  value_ptrs.push_back(nullptr);
  PGconn* conn = PQconnectdbParams(key_ptrs.data(), value_ptrs.data(), /*expand_dbname=*/0);
  if (conn == nullptr) return Status::resource_exhausted("'" + display + "': out of memory connecting");
  if (PQstatus(conn) != CONNECTION_OK) {
    const std::string why = pg_trimmed(PQerrorMessage(conn));
    PQfinish(conn);
    return Status::unavailable("'" + display + "': cannot connect to the PostgreSQL server: " + why);
  }
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);  // "already exists, skipping" and such
  PGresult* res = PQexec(conn, (std::string("SET statement_timeout = ") + kPgStatementTimeoutMs).c_str());
  const bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
  const std::string why = ok ? std::string() : pg_trimmed(PQresultErrorMessage(res));
  PQclear(res);
  if (!ok) {
    PQfinish(conn);
    return Status::io_error("'" + display + "': setting statement_timeout: " + why);
  }
  return conn;
}

Result<std::unique_ptr<PgConnection>> PgConnection::open(const std::string& url) {
  std::string display = pg_display_name(url);
  LG_ASSIGN_OR_RETURN(pg_conn* conn, pg_connect(url, display));
  return std::unique_ptr<PgConnection>(new PgConnection(url, std::move(display), conn));
}

PgConnection::~PgConnection() { PQfinish(conn_); }

Status PgConnection::ensure_connected() {
  if (conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK) return Status::ok();
  if (in_write_) {
    return Status::unavailable("'" + display_ + "': the connection was lost inside a transaction, which is rolled back");
  }
  LG_ASSIGN_OR_RETURN(pg_conn* fresh, pg_connect(url_, display_));
  PQfinish(conn_);
  conn_ = fresh;
  return Status::ok();
}

Result<pg_result*> PgConnection::check(pg_result* res, std::string_view what, std::string_view sql) {
  const ExecStatusType status = res != nullptr ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
    const std::string_view command = PQcmdStatus(res);
    if (command.starts_with("INSERT") || command.starts_with("UPDATE") || command.starts_with("DELETE")) {
      changes_ = std::strtoll(PQcmdTuples(res), nullptr, 10);
    }
    return res;
  }
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  const std::string sqlstate = state != nullptr ? state : "";
  std::string message = "'" + display_ + "': " + std::string(what) + ": " +
                        pg_trimmed(res != nullptr ? PQresultErrorMessage(res) : PQerrorMessage(conn_));
  if (message.back() == ' ') message += "(no message)";
  PQclear(res);
  if (!sqlstate.empty()) message += " [" + sqlstate + "]";
  if (!sql.empty()) message += " (sql: " + std::string(sql) + ")";
  if (sqlstate.empty() && PQstatus(conn_) != CONNECTION_OK) {
    return Status::unavailable(message + "; the next call connects again");
  }
  return pg_status_for_sqlstate(sqlstate, std::move(message));
}

Result<pg_result*> PgConnection::execute(const std::string& sql, const std::vector<const char*>& params,
                                         std::string_view what) {
  LG_RETURN_IF_ERROR(ensure_connected());
  PGresult* res = PQexecParams(conn_, sql.c_str(), static_cast<int>(params.size()), nullptr, params.data(), nullptr,
                               nullptr, /*resultFormat=*/0);
  return check(res, what, sql);
}

Status PgConnection::exec(std::string_view sql) {
  LG_RETURN_IF_ERROR(ensure_connected());
  const std::string text(sql);
  LG_ASSIGN_OR_RETURN(PGresult * res, check(PQexec(conn_, text.c_str()), "running", text));
  PQclear(res);
  return Status::ok();
}

Result<Statement> PgConnection::prepare(std::string_view sql) {
  auto translated = pg_translate_placeholders(sql);
  if (!translated) return translated.status().with_context("'" + display_ + "'");
  return Statement(std::make_unique<PgCursor>(this, std::string(sql), std::move(translated->first),
                                              translated->second));
}

bool PgConnection::in_transaction() const {
  if (in_write_) return true;
  if (conn_ == nullptr) return false;
  const PGTransactionStatusType t = PQtransactionStatus(conn_);
  return t == PQTRANS_INTRANS || t == PQTRANS_INERROR;
}

Status PgConnection::begin_write() {
  if (in_write_) return Status::internal("'" + display_ + "': a transaction is already open");
  LG_RETURN_IF_ERROR(exec("BEGIN"));
  in_write_ = true;
  const Status locked = exec("SELECT pg_advisory_xact_lock(" + std::to_string(kPgRegistryLockKey) + ")");
  if (!locked.is_ok()) {
    rollback();
    return locked.with_context("waiting for the registry's write lock");
  }
  return Status::ok();
}

Status PgConnection::commit() {
  if (!in_write_) return Status::internal("'" + display_ + "': commit with no transaction open");
  if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
    in_write_ = false;
    return Status::unavailable("'" + display_ + "': the connection was lost inside a transaction, which is rolled back");
  }
  PGresult* raw = PQexec(conn_, "COMMIT");
  in_write_ = false;  // committed, refused or lost: the transaction is over either way
  LG_ASSIGN_OR_RETURN(PGresult * res, check(raw, "committing", ""));
  // COMMIT of a transaction that failed answers ROLLBACK, with no error.
  const bool rolled_back = std::string_view(PQcmdStatus(res)) == "ROLLBACK";
  PQclear(res);
  if (rolled_back) return Status::internal("'" + display_ + "': the transaction failed and was rolled back");
  return Status::ok();
}

void PgConnection::rollback() {
  in_write_ = false;
  if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) return;  // gone: so is the transaction
  if (PQtransactionStatus(conn_) == PQTRANS_IDLE) return;
  PQclear(PQexec(conn_, "ROLLBACK"));
}

Status PgConnection::notify_change() { return exec(std::string("NOTIFY ") + kPgRegistryChannel); }

}  // namespace loragate
