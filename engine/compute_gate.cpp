#include "engine/compute_gate.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <utility>

namespace loragate {
namespace {

double clamp_share(double share) {
  if (std::isnan(share)) return 0.0;
  return std::clamp(share, 0.0, 1.0);
}

}  // namespace

ComputeGate::ComputeGate(double candidate_share) : share_(clamp_share(candidate_share)) {}

uint64_t ComputeGate::enqueue_locked(bool serving) {
  const uint64_t ticket = next_ticket_++;
  (serving ? serving_queue_ : candidate_queue_).push_back({ticket, Clock::now()});
  grant_locked();
  return ticket;
}

void ComputeGate::grant_locked() {
  if (holder_ != 0 || (serving_queue_.empty() && candidate_queue_.empty())) return;
  const bool contested = !serving_queue_.empty() && !candidate_queue_.empty();
  bool candidate = serving_queue_.empty();
  if (contested) {
    ++stats_.contested_grants;
    const double total = static_cast<double>(stats_.contested_serving_ns + stats_.contested_candidate_ns);
    candidate = share_ > 0 && static_cast<double>(stats_.contested_candidate_ns) <= share_ * total;
    if (candidate) ++stats_.contested_candidate_turns;
  }
  std::deque<Queued>& queue = candidate ? candidate_queue_ : serving_queue_;
  const Clock::time_point now = Clock::now();
  holder_ = queue.front().ticket;
  holder_serving_ = !candidate;
  holder_contested_ = contested;
  held_since_ = now;
  const int64_t waited = std::chrono::duration_cast<std::chrono::nanoseconds>(now - queue.front().since).count();
  queue.pop_front();
  ++(candidate ? stats_.candidate_turns : stats_.serving_turns);
  (candidate ? stats_.candidate_wait_ns : stats_.serving_wait_ns) += waited;
  granted_.notify_all();
}

void ComputeGate::release_locked(uint64_t ticket) {
  assert(holder_ == ticket);
  if (holder_ != ticket) return;
  const int64_t held = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - held_since_).count();
  (holder_serving_ ? stats_.serving_held_ns : stats_.candidate_held_ns) += held;
  if (holder_contested_) (holder_serving_ ? stats_.contested_serving_ns : stats_.contested_candidate_ns) += held;
  holder_ = 0;
  grant_locked();
}

void ComputeGate::withdraw_locked(uint64_t ticket, bool serving) {
  std::deque<Queued>& queue = serving ? serving_queue_ : candidate_queue_;
  auto it = std::find_if(queue.begin(), queue.end(), [&](const Queued& q) { return q.ticket == ticket; });
  if (it != queue.end()) queue.erase(it);
}

void ComputeGate::acquire(bool serving) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = enqueue_locked(serving);
  granted_.wait(lock, [&] { return holder_ == ticket; });
}

void ComputeGate::release() {
  std::lock_guard<std::mutex> lock(mu_);
  assert(holder_ != 0);
  if (holder_ != 0) release_locked(holder_);
}

ComputeGate::Turn ComputeGate::enqueue(bool serving) {
  std::lock_guard<std::mutex> lock(mu_);
  return Turn(this, enqueue_locked(serving), serving);
}

void ComputeGate::wake_waiters() {
  std::lock_guard<std::mutex> lock(mu_);  // orders the caller's flag store before the waiters' recheck
  granted_.notify_all();
}

ComputeGateStats ComputeGate::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ComputeGateStats s = stats_;
  s.serving_queued = static_cast<int32_t>(serving_queue_.size());
  s.candidate_queued = static_cast<int32_t>(candidate_queue_.size());
  s.held = holder_ != 0;
  s.held_by_serving = s.held && holder_serving_;
  return s;
}

// ---------------------------------------------------------------------------
// Turn

ComputeGate::Turn::Turn(ComputeGate& gate, bool serving) : Turn(gate.enqueue(serving)) { wait(); }

ComputeGate::Turn::Turn(Turn&& other) noexcept
    : gate_(std::exchange(other.gate_, nullptr)), ticket_(other.ticket_), serving_(other.serving_) {}

ComputeGate::Turn& ComputeGate::Turn::operator=(Turn&& other) noexcept {
  if (this != &other) {
    reset();
    gate_ = std::exchange(other.gate_, nullptr);
    ticket_ = other.ticket_;
    serving_ = other.serving_;
  }
  return *this;
}

bool ComputeGate::Turn::wait(const std::atomic<bool>* interrupted) {
  if (gate_ == nullptr) return false;
  std::unique_lock<std::mutex> lock(gate_->mu_);
  gate_->granted_.wait(lock, [&] {
    return gate_->holder_ == ticket_ || (interrupted != nullptr && interrupted->load());
  });
  return gate_->holder_ == ticket_;
}

bool ComputeGate::Turn::granted() const {
  if (gate_ == nullptr) return false;
  std::lock_guard<std::mutex> lock(gate_->mu_);
  return gate_->holder_ == ticket_;
}

void ComputeGate::Turn::reset() {
  if (gate_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(gate_->mu_);
    if (gate_->holder_ == ticket_) {
      gate_->release_locked(ticket_);
    } else {
      gate_->withdraw_locked(ticket_, serving_);
    }
  }
  gate_ = nullptr;
}

}  // namespace loragate
