// ComputeGate: one compute pool (the cores OpenMP forward passes run on)
// shared by several EngineLoops, e.g. the serving base and a candidate base
// living in one process.
//
// A caller takes a turn before each engine step and gives it back after, so
// two steps never run at once. Callers are of three classes: serving,
// candidate (a non-serving base's live work, e.g. shadow traffic) and
// background (a loop whose work is all background-priority, e.g. in-server
// evaluations, on any base). Policy, applied whenever the gate is free and
// someone is queued:
//  - background gets the turn only while no serving or candidate caller is
//    queued: evaluation work yields to live traffic on every base (the
//    background steps themselves are kept short by the scheduler's
//    max_background_tokens, so a live step waits at most one of them);
//  - only one of serving and candidate queued: its front caller gets the turn;
//  - both queued (a contested grant): the candidate gets the turn while its
//    part of the time held in contested turns is at most `candidate_share`,
//    the serving class otherwise. The share is of compute time, not of
//    steps: a candidate step that scores a long prompt costs it as many
//    serving decode steps as it took, so it cannot stretch the serving base's
//    latency beyond the share. share 0 lets a candidate run only while no
//    serving caller is queued, share 1 lets serving run only while no
//    candidate is;
//  - FIFO within a class.
// Contention (between serving and candidate) is decided among the callers
// queued at the moment the gate frees up. A loop that steps again at once
// should therefore queue for its next turn (enqueue()) before giving back the
// current one: otherwise, with two alternating loops, each release would find
// only the other loop queued and every grant would be uncontested (strict
// alternation, share 0.5); and a busy serving loop keeps background callers
// waiting until it idles. EngineLoop does this while its engine has work.
//
// Ownership: shared (std::shared_ptr) by the loops using it; it must outlive
// every Turn taken from it. Thread-safety: all methods are thread-safe; a Turn
// is used by one thread at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>

namespace loragate {

// The class a caller queues in (see above).
enum class GateClass { kServing, kCandidate, kBackground };
const char* gate_class_name(GateClass c);  // "serving", "candidate", "background"

struct ComputeGateStats {
  int64_t serving_turns = 0;              // turns granted to serving callers
  int64_t candidate_turns = 0;            // turns granted to candidate callers
  int64_t contested_grants = 0;           // grants made with both classes queued
  int64_t contested_candidate_turns = 0;  // of those, the ones the candidate got
  int64_t contested_serving_ns = 0, contested_candidate_ns = 0;  // time held in contested turns (finished)
  // Time turns were held (finished turns) and waited for (granted turns),
  // by class: a class that runs "at full rate" holds the gate nearly all the
  // time and waits nearly never.
  int64_t serving_held_ns = 0, candidate_held_ns = 0;
  int64_t serving_wait_ns = 0, candidate_wait_ns = 0;
  int32_t serving_queued = 0, candidate_queued = 0;  // waiting now (not holding)
  int64_t background_turns = 0;                      // turns granted to background callers
  int64_t background_held_ns = 0, background_wait_ns = 0;
  int32_t background_queued = 0;
  bool held = false;                                 // a turn is held now
  bool held_by_serving = false;                      // ... by a serving caller (meaningful when held)
  GateClass held_by = GateClass::kServing;           // ... by a caller of this class (meaningful when held)
};

class ComputeGate {
 public:
  // `candidate_share` is clamped to [0, 1] (NaN counts as 0).
  explicit ComputeGate(double candidate_share = 0.25);
  ComputeGate(const ComputeGate&) = delete;
  ComputeGate& operator=(const ComputeGate&) = delete;

  double candidate_share() const { return share_; }

  // Blocks until the caller holds the turn. Pair with release(); Turn does
  // both. `serving` false is the candidate class.
  void acquire(GateClass c);
  void acquire(bool serving) { acquire(class_of(serving)); }
  // Gives back the turn the calling thread took with acquire() and grants the next one.
  void release();

  // A place in the gate's queue, then the turn itself once granted. Move-only;
  // destroying (or reset()) a granted Turn releases it, an ungranted one
  // leaves the queue. An empty Turn (default-constructed, moved from) is neither.
  class Turn {
   public:
    Turn() = default;
    // Queues and blocks until granted (like acquire()).
    Turn(ComputeGate& gate, GateClass c);
    Turn(ComputeGate& gate, bool serving) : Turn(gate, class_of(serving)) {}
    Turn(Turn&& other) noexcept;
    Turn& operator=(Turn&& other) noexcept;
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    ~Turn() { reset(); }

    // Blocks until granted; returns true then. With `interrupted`, also
    // returns (false, the place in the queue kept) once *interrupted is true;
    // whoever sets the flag calls ComputeGate::wake_waiters() afterwards.
    // Returns false at once for an empty Turn.
    bool wait(const std::atomic<bool>* interrupted = nullptr);
    // True when this turn is granted (the caller may step).
    bool granted() const;
    bool empty() const { return gate_ == nullptr; }
    GateClass gate_class() const { return class_; }
    bool serving() const { return class_ == GateClass::kServing; }
    // Releases (granted) or leaves the queue (not yet); the Turn becomes empty.
    void reset();

   private:
    friend class ComputeGate;
    Turn(ComputeGate* gate, uint64_t ticket, GateClass c) : gate_(gate), ticket_(ticket), class_(c) {}
    ComputeGate* gate_ = nullptr;
    uint64_t ticket_ = 0;
    GateClass class_ = GateClass::kServing;
  };

  // Queues the caller without blocking; the returned Turn may already be
  // granted. Wait on it before stepping.
  Turn enqueue(GateClass c);
  Turn enqueue(bool serving) { return enqueue(class_of(serving)); }
  // Wakes every blocked Turn::wait so it rechecks its `interrupted` flag.
  void wake_waiters();

  ComputeGateStats stats() const;

 private:
  static GateClass class_of(bool serving) { return serving ? GateClass::kServing : GateClass::kCandidate; }
  uint64_t enqueue_locked(GateClass c);
  // Grants the next turn when the gate is free and someone is queued.
  void grant_locked();
  void release_locked(uint64_t ticket);
  void withdraw_locked(uint64_t ticket, GateClass c);

  using Clock = std::chrono::steady_clock;
  struct Queued {
    uint64_t ticket;
    Clock::time_point since;
  };

  const double share_;
  mutable std::mutex mu_;
  std::condition_variable granted_;
  std::deque<Queued>& queue_locked(GateClass c) {
    return c == GateClass::kServing ? serving_queue_ : c == GateClass::kCandidate ? candidate_queue_ : background_queue_;
  }

  std::deque<Queued> serving_queue_, candidate_queue_, background_queue_;  // guarded by mu_
  uint64_t holder_ = 0;                                  // ticket holding the turn, 0 = free; guarded by mu_
  GateClass holder_class_ = GateClass::kServing;         // guarded by mu_
  Clock::time_point held_since_;                         // guarded by mu_
  uint64_t next_ticket_ = 1;                             // guarded by mu_
  bool holder_contested_ = false;                        // the turn was granted under contention; guarded by mu_
  ComputeGateStats stats_;                               // guarded by mu_
};

}  // namespace loragate
