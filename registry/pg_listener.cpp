#include "registry/pg_listener.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <utility>

#include "registry/pg_connection.h"

namespace loragate {

PgChangeListener::PgChangeListener(std::string url) : url_(std::move(url)), display_(pg_display_name(url_)) {}

PgChangeListener::~PgChangeListener() { PQfinish(conn_); }

Status PgChangeListener::listen_locked() {
  PQfinish(conn_);
  conn_ = nullptr;
  LG_ASSIGN_OR_RETURN(pg_conn* conn, pg_connect(url_, display_));
  PGresult* res = PQexec(conn, (std::string("LISTEN ") + kPgRegistryChannel).c_str());
  const bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
  const std::string why = ok ? std::string() : PQresultErrorMessage(res);
  PQclear(res);
  if (!ok) {
    PQfinish(conn);
    return Status::io_error("'" + display_ + "': LISTEN " + kPgRegistryChannel + ": " + why);
  }
  conn_ = conn;
  return Status::ok();
}

bool PgChangeListener::drain_locked(bool* lost) {
  *lost = PQconsumeInput(conn_) == 0 || PQstatus(conn_) != CONNECTION_OK;
  bool any = false;
  while (PGnotify* n = PQnotifies(conn_)) {
    any = true;
    PQfreemem(n);
  }
  return any;
}

Result<bool> PgChangeListener::wait(int64_t timeout_ms) {
  std::lock_guard lock(mu_);
  if (conn_ == nullptr) {
    LG_RETURN_IF_ERROR(listen_locked());
    return true;  // nothing listened before now
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0));
  for (;;) {
    bool lost = false;
    const bool notified = drain_locked(&lost);
    if (lost) {
      LG_RETURN_IF_ERROR(listen_locked().with_context("the registry's change listener lost its connection"));
      return true;  // a change may have gone by while it was down
    }
    if (notified) return true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd fd{PQsocket(conn_), POLLIN, 0};
    const int ready = ::poll(&fd, 1, static_cast<int>(std::min<int64_t>(left.count(), 60000)));
    if (ready < 0 && errno != EINTR) {
      return Status::io_error("'" + display_ + "': waiting for registry changes: poll failed (errno " +
                              std::to_string(errno) + ")");
    }
  }
}

}  // namespace loragate
