#include "gateway/http/session_tracker.h"

namespace loragate {

uint64_t SessionTracker::add(std::weak_ptr<HttpSession> session) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t key = next_key_++;
  sessions_.emplace(key, std::move(session));
  return key;
}

void SessionTracker::remove(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.erase(key);
  if (sessions_.empty()) empty_.notify_all();
}

size_t SessionTracker::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

std::vector<std::shared_ptr<HttpSession>> SessionTracker::live() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<HttpSession>> out;
  for (const auto& [key, weak] : sessions_) {
    if (auto s = weak.lock()) out.push_back(std::move(s));
  }
  return out;
}

bool SessionTracker::wait_empty_until(std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock<std::mutex> lock(mu_);
  return empty_.wait_until(lock, deadline, [&] { return sessions_.empty(); });
}

}  // namespace loragate
