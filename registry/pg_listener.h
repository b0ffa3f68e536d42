// PgChangeListener: Registry::wait_for_change on PostgreSQL. Its own
// connection LISTENs on kPgRegistryChannel, which every registry write that
// may change what a replica serves NOTIFYs inside its transaction (so the
// notification arrives on commit, this process's writes included); wait()
// sleeps in poll() on that connection's socket.
//
// The connection is made by the first wait(), which answers true: nothing
// was listened to before it, so a change may have been missed. A lost
// connection is made again, also answering true; when it cannot be, wait()
// fails with io_error naming the server and the next wait() tries again.
//
// Thread-safety: wait() may be called from any thread; calls are serialised
// on a mutex (the registry's contract: one waiter at a time).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "common/status.h"

struct pg_conn;

namespace loragate {

class PgChangeListener {
 public:
  explicit PgChangeListener(std::string url);
  ~PgChangeListener();
  PgChangeListener(const PgChangeListener&) = delete;
  PgChangeListener& operator=(const PgChangeListener&) = delete;

  // True when a notification came (or may have been missed) within
  // `timeout_ms`; false when the time passed quietly.
  Result<bool> wait(int64_t timeout_ms);

 private:
  // Connects and LISTENs; the caller holds mu_.
  Status listen_locked();
  // Drains received notifications; true when there was one. False with
  // *lost set when the connection broke. The caller holds mu_.
  bool drain_locked(bool* lost);

  std::mutex mu_;
  std::string url_, display_;
  pg_conn* conn_ = nullptr;  // guarded by mu_
};

}  // namespace loragate
