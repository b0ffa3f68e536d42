// SessionTracker: the set of live HTTP sessions, so the server can refuse
// connections past its limit and, on stop(), close idle sessions and wait for
// busy ones. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace loragate {

class HttpSession;

class SessionTracker {
 public:
  // Registers a session; returns the key its destructor passes to remove().
  uint64_t add(std::weak_ptr<HttpSession> session);
  void remove(uint64_t key);
  size_t size() const;
  // The sessions still alive.
  std::vector<std::shared_ptr<HttpSession>> live() const;
  // Waits until no session is left or `deadline` passes; true when empty.
  bool wait_empty_until(std::chrono::steady_clock::time_point deadline) const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable empty_;
  std::map<uint64_t, std::weak_ptr<HttpSession>> sessions_;  // guarded by mu_
  uint64_t next_key_ = 1;                                    // guarded by mu_
};

}  // namespace loragate
