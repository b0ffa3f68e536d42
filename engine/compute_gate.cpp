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

const char* gate_class_name(GateClass c) {
  switch (c) {
    case GateClass::kServing: return "serving";
    case GateClass::kCandidate: return "candidate";
    case GateClass::kBackground: return "background";
  }
  return "serving";
}

ComputeGate::ComputeGate(double candidate_share) : share_(clamp_share(candidate_share)) {}

uint64_t ComputeGate::enqueue_locked(GateClass c) {
  const uint64_t ticket = next_ticket_++;
  queue_locked(c).push_back({ticket, Clock::now()});
  grant_locked();
  return ticket;
}

void ComputeGate::grant_locked() {
  if (holder_ != 0) return;
  GateClass next = GateClass::kBackground;  // only while neither live class is queued
  const bool contested = !serving_queue_.empty() && !candidate_queue_.empty();
  if (contested) {
    ++stats_.contested_grants;
    const double total = static_cast<double>(stats_.contested_serving_ns + stats_.contested_candidate_ns);
    const bool candidate = share_ > 0 && static_cast<double>(stats_.contested_candidate_ns) <= share_ * total;
    if (candidate) ++stats_.contested_candidate_turns;
    next = candidate ? GateClass::kCandidate : GateClass::kServing;
  } else if (!serving_queue_.empty()) {
    next = GateClass::kServing;
  } else if (!candidate_queue_.empty()) {
    next = GateClass::kCandidate;
  }
  std::deque<Queued>& queue = queue_locked(next);
  if (queue.empty()) return;
  const Clock::time_point now = Clock::now();
  holder_ = queue.front().ticket;
  holder_class_ = next;
  holder_contested_ = contested;
  held_since_ = now;
  const int64_t waited = std::chrono::duration_cast<std::chrono::nanoseconds>(now - queue.front().since).count();
  queue.pop_front();
  switch (next) {
    case GateClass::kServing:
      ++stats_.serving_turns;
      stats_.serving_wait_ns += waited;
      break;
    case GateClass::kCandidate:
      ++stats_.candidate_turns;
      stats_.candidate_wait_ns += waited;
      break;
    case GateClass::kBackground:
      ++stats_.background_turns;
      stats_.background_wait_ns += waited;
      break;
  }
  granted_.notify_all();
}

void ComputeGate::release_locked(uint64_t ticket) {
  assert(holder_ == ticket);
  if (holder_ != ticket) return;
  const int64_t held = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - held_since_).count();
  const bool serving = holder_class_ == GateClass::kServing;
  switch (holder_class_) {
    case GateClass::kServing: stats_.serving_held_ns += held; break;
    case GateClass::kCandidate: stats_.candidate_held_ns += held; break;
    case GateClass::kBackground: stats_.background_held_ns += held; break;
  }
  if (holder_contested_) (serving ? stats_.contested_serving_ns : stats_.contested_candidate_ns) += held;
  holder_ = 0;
  grant_locked();
}

void ComputeGate::withdraw_locked(uint64_t ticket, GateClass c) {
  std::deque<Queued>& queue = queue_locked(c);
  auto it = std::find_if(queue.begin(), queue.end(), [&](const Queued& q) { return q.ticket == ticket; });
  if (it != queue.end()) queue.erase(it);
}

void ComputeGate::acquire(GateClass c) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = enqueue_locked(c);
  granted_.wait(lock, [&] { return holder_ == ticket; });
}

void ComputeGate::release() {
  std::lock_guard<std::mutex> lock(mu_);
  assert(holder_ != 0);
  if (holder_ != 0) release_locked(holder_);
}

ComputeGate::Turn ComputeGate::enqueue(GateClass c) {
  std::lock_guard<std::mutex> lock(mu_);
  return Turn(this, enqueue_locked(c), c);
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
  s.background_queued = static_cast<int32_t>(background_queue_.size());
  s.held = holder_ != 0;
  s.held_by_serving = s.held && holder_class_ == GateClass::kServing;
  s.held_by = holder_class_;
  return s;
}

// ---------------------------------------------------------------------------
// Turn

ComputeGate::Turn::Turn(ComputeGate& gate, GateClass c) : Turn(gate.enqueue(c)) { wait(); }

ComputeGate::Turn::Turn(Turn&& other) noexcept
    : gate_(std::exchange(other.gate_, nullptr)), ticket_(other.ticket_), class_(other.class_) {}

ComputeGate::Turn& ComputeGate::Turn::operator=(Turn&& other) noexcept {
  if (this != &other) {
    reset();
    gate_ = std::exchange(other.gate_, nullptr);
    ticket_ = other.ticket_;
    class_ = other.class_;
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
      gate_->withdraw_locked(ticket_, class_);
    }
  }
  gate_ = nullptr;
}

}  // namespace loragate
