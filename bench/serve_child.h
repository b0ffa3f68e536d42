// ServeChild: `loragate serve` run as a child process for a benchmark that
// drives it over loopback.
//
// start() forks and execs the binary with the given arguments, reads what the
// child prints until its "serving ... on http://HOST:PORT" line, then polls
// GET /health until it answers 200. Everything the child prints (stdout and
// stderr together: the request log too) is drained by a thread, and its last
// few KiB kept, so that a child that fails to start is reported with its own
// words and never blocks on a full pipe.
//
// The child dies with its parent (PR_SET_PDEATHSIG), and the destructor stops
// it on every path out of the benchmark: SIGTERM, a short grace, then SIGKILL.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace loragate::bench {

class ServeChild {
 public:
  // Runs `executable serve <serve_args...>` and waits (up to `start_timeout`)
  // until it serves; the error says why not, with the tail of its output.
  static Result<std::unique_ptr<ServeChild>> start(const std::string& executable,
                                                   const std::vector<std::string>& serve_args,
                                                   std::chrono::seconds start_timeout);
  ~ServeChild();
  ServeChild(const ServeChild&) = delete;
  ServeChild& operator=(const ServeChild&) = delete;

  const std::string& url() const { return url_; }  // "http://127.0.0.1:PORT"
  pid_t pid() const { return pid_; }
  // The last bytes the child printed.
  std::string output_tail() const;
  // SIGTERM and wait for a graceful exit (SIGKILL after `grace`); ok when it exited 0.
  Status stop(std::chrono::seconds grace = std::chrono::seconds(30));

 private:
  ServeChild() = default;
  void drain();
  // The exit status once the child is gone, waiting up to `timeout`; -1 while it still runs.
  int reap(std::chrono::milliseconds timeout);
  Status wait_until_serving(std::chrono::steady_clock::time_point deadline);
  Status wait_until_healthy(std::chrono::steady_clock::time_point deadline);
  Status failed(const std::string& what) const;

  pid_t pid_ = -1;
  int out_fd_ = -1;  // the read end of the child's stdout+stderr
  std::string url_;
  std::thread drainer_;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::string tail_;          // guarded by mu_: the last kTailBytes printed
  std::string first_lines_;   // guarded by mu_: what came before the URL (for the URL line)
  bool eof_ = false;          // guarded by mu_: the child closed its output (it exited)
};

}  // namespace loragate::bench
