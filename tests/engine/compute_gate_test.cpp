// ComputeGate: one holder at a time, the candidate's share of contested
// time, FIFO within a class, and the queue/interrupt mechanics EngineLoop uses.
#include "engine/compute_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

namespace loragate {
namespace {

using namespace std::chrono_literals;

// Waits (bounded) until `pred` holds; returns whether it did.
template <typename Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 5000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return pred();
}

TEST(ComputeGateTest, ShareIsClampedToZeroOne) {
  EXPECT_EQ(ComputeGate(-0.5).candidate_share(), 0.0);
  EXPECT_EQ(ComputeGate(1.5).candidate_share(), 1.0);
  EXPECT_EQ(ComputeGate(std::numeric_limits<double>::quiet_NaN()).candidate_share(), 0.0);
  EXPECT_EQ(ComputeGate(0.3).candidate_share(), 0.3);
  EXPECT_EQ(ComputeGate().candidate_share(), 0.25);
}

TEST(ComputeGateTest, OneHolderAtATimeUnderManyThreads) {
  ComputeGate gate(0.25);
  constexpr int kThreads = 16, kTurns = 200;
  std::atomic<int> inside{0}, max_inside{0};
  std::atomic<int64_t> total{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const bool serving = t % 2 == 0;
      for (int i = 0; i < kTurns; ++i) {
        auto body = [&] {
          const int now = inside.fetch_add(1) + 1;
          int seen = max_inside.load();
          while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
          }
          EXPECT_TRUE(gate.stats().held);
          EXPECT_EQ(gate.stats().held_by_serving, serving);
          total.fetch_add(1);
          inside.fetch_sub(1);
        };
        if (i % 2 == 0) {
          ComputeGate::Turn turn(gate, serving);
          body();
        } else {
          gate.acquire(serving);
          body();
          gate.release();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(max_inside.load(), 1);
  EXPECT_EQ(total.load(), kThreads * kTurns);
  const ComputeGateStats s = gate.stats();
  EXPECT_EQ(s.serving_turns, kThreads / 2 * kTurns);
  EXPECT_EQ(s.candidate_turns, kThreads / 2 * kTurns);
  EXPECT_FALSE(s.held);
  EXPECT_EQ(s.serving_queued + s.candidate_queued, 0);
}

// Several threads of one class contend among themselves only: never a contested grant.
void run_one_class(bool serving) {
  ComputeGate gate(0.25);
  constexpr int kThreads = 4, kTurns = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kTurns; ++i) {
        ComputeGate::Turn turn(gate, serving);
        EXPECT_TRUE(turn.granted());
      }
    });
  }
  for (auto& th : threads) th.join();
  const ComputeGateStats s = gate.stats();
  EXPECT_EQ(serving ? s.serving_turns : s.candidate_turns, kThreads * kTurns);
  EXPECT_EQ(serving ? s.candidate_turns : s.serving_turns, 0);
  EXPECT_EQ(s.contested_grants, 0);
}

TEST(ComputeGateTest, ServingAloneGetsEveryTurn) { run_one_class(true); }
TEST(ComputeGateTest, CandidateAloneGetsEveryTurn) { run_one_class(false); }

// Holds the turn for `d` (a step's worth of work), spinning as a forward pass does.
void hold_for(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

// Single-threaded: one turn of each class always queued, so every grant
// after the first is contested; serving steps take `serving_us`, candidate
// steps `candidate_us`. Returns the candidate's part of the contested time.
double candidate_time_share(double share, int grants, int serving_us, int candidate_us, int64_t* candidate_turns) {
  ComputeGate gate(share);
  ComputeGate::Turn serving = gate.enqueue(true);  // free gate: granted at once, uncontested
  EXPECT_TRUE(serving.granted());
  ComputeGate::Turn candidate = gate.enqueue(false);
  for (int i = 0; i < grants; ++i) {
    ComputeGate::Turn& holder = serving.granted() ? serving : candidate;
    EXPECT_TRUE(holder.granted());
    const bool was_serving = holder.serving();
    if (i > 0) hold_for(std::chrono::microseconds(was_serving ? serving_us : candidate_us));
    ComputeGate::Turn again = gate.enqueue(was_serving);  // queue again before giving back
    holder = std::move(again);                           // releases: a contested grant
  }
  const ComputeGateStats s = gate.stats();
  EXPECT_EQ(s.contested_grants, grants);
  EXPECT_EQ(s.serving_turns + s.candidate_turns, grants + 1);
  *candidate_turns = s.contested_candidate_turns;
  return double(s.contested_candidate_ns) / double(s.contested_candidate_ns + s.contested_serving_ns);
}

TEST(ComputeGateTest, ContestedShareIsOfTime) {
  int64_t turns = 0;
  for (double share : {0.1, 0.25, 0.5}) {
    // Only the time is the contract: a turn descheduled by the machine holds the
    // gate longer, and the policy then rightly gives that class fewer turns.
    EXPECT_NEAR(candidate_time_share(share, 300, 1000, 1000, &turns), share, 0.05) << share << ", " << turns << " turns";
  }
  EXPECT_EQ(candidate_time_share(0.0, 100, 50, 50, &turns), 0.0);
  EXPECT_EQ(turns, 0);
  EXPECT_EQ(candidate_time_share(1.0, 100, 50, 50, &turns), 1.0);
  EXPECT_EQ(turns, 100);
}

TEST(ComputeGateTest, HeavyCandidateStepsGetFewerTurns) {
  // A candidate step 6x as long as a serving one (a scoring prefill against
  // decodes) keeps a quarter of the time, so about 1 turn in 19. Steps of
  // ms, so a few ms of descheduling on a loaded machine stay within bounds.
  int64_t turns = 0;
  EXPECT_NEAR(candidate_time_share(0.25, 400, 500, 3000, &turns), 0.25, 0.05);
  EXPECT_LT(double(turns) / 400, 0.15) << turns << " candidate turns (1 in 19 when undisturbed)";
}

// Two threads stepping as EngineLoops do (queue for the next turn, then give
// back the current one) until ~400 turns were granted.
void run_two_loops(double share) {
  ComputeGate gate(share);
  std::atomic<bool> stop{false};
  constexpr int64_t kGrants = 400;
  auto loop = [&](bool serving) {
    ComputeGate::Turn turn = gate.enqueue(serving);
    while (turn.wait()) {
      const ComputeGateStats s = gate.stats();
      if (s.serving_turns + s.candidate_turns >= kGrants) stop = true;
      hold_for(std::chrono::microseconds(100));  // a step's worth of work
      turn = stop ? ComputeGate::Turn() : gate.enqueue(serving);
    }
  };
  // Both loops queue behind a blocker first, so contention starts with the first grant.
  ComputeGate::Turn blocker = gate.enqueue(true);
  std::thread serving(loop, true), candidate(loop, false);
  ASSERT_TRUE(eventually([&] {
    const ComputeGateStats q = gate.stats();
    return q.serving_queued == 1 && q.candidate_queued == 1;
  }));
  blocker.reset();
  serving.join();
  candidate.join();
  const ComputeGateStats s = gate.stats();
  ASSERT_GE(s.contested_grants, kGrants - 4);
  const double time = double(s.contested_candidate_ns) / double(s.contested_candidate_ns + s.contested_serving_ns);
  EXPECT_NEAR(time, share, 0.1) << s.contested_candidate_turns << " of " << s.contested_grants << " turns";

}

TEST(ComputeGateTest, TwoBusyLoopsSplitAQuarter) { run_two_loops(0.25); }
TEST(ComputeGateTest, TwoBusyLoopsSplitAHalf) { run_two_loops(0.5); }

TEST(ComputeGateTest, ShareZeroRunsTheCandidateOnlyWhenServingIsIdle) {
  ComputeGate gate(0.0);
  constexpr int kServingTurns = 200;
  std::atomic<int64_t> serving_turns_when_candidate_ran{-1};
  ComputeGate::Turn first = gate.enqueue(true);
  ASSERT_TRUE(first.granted());
  std::thread candidate([&] {
    gate.acquire(false);
    serving_turns_when_candidate_ran = gate.stats().serving_turns;
    gate.release();
  });
  ASSERT_TRUE(eventually([&] { return gate.stats().candidate_queued == 1; }));
  std::thread serving([&] {
    ComputeGate::Turn turn = std::move(first);
    for (int i = 1; i < kServingTurns; ++i) {
      ComputeGate::Turn next = gate.enqueue(true);
      turn = std::move(next);
      EXPECT_TRUE(turn.wait());
      EXPECT_EQ(serving_turns_when_candidate_ran.load(), -1) << "the candidate ran while serving was busy";
    }
  });  // the last turn is released when the thread ends: serving idles
  serving.join();
  candidate.join();
  EXPECT_EQ(serving_turns_when_candidate_ran.load(), kServingTurns);
  const ComputeGateStats s = gate.stats();
  EXPECT_EQ(s.candidate_turns, 1);
  EXPECT_EQ(s.contested_candidate_turns, 0);
  EXPECT_EQ(s.contested_grants, kServingTurns - 1);
}

TEST(ComputeGateTest, FifoWithinAClass) {
  ComputeGate gate(0.25);
  for (bool serving : {true, false}) {
    ComputeGate::Turn blocker = gate.enqueue(true);
    ASSERT_TRUE(blocker.granted());
    constexpr int kWaiters = 6;
    std::mutex mu;
    std::vector<int> order;
    std::vector<std::thread> threads;
    for (int i = 0; i < kWaiters; ++i) {
      threads.emplace_back([&, i] {
        gate.acquire(serving);
        {
          std::lock_guard<std::mutex> lock(mu);
          order.push_back(i);
        }
        gate.release();
      });
      // Start the next waiter only once this one is queued.
      ASSERT_TRUE(eventually([&] {
        const ComputeGateStats s = gate.stats();
        return (serving ? s.serving_queued : s.candidate_queued) == i + 1;
      }));
    }
    blocker.reset();
    for (auto& th : threads) th.join();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5})) << (serving ? "serving" : "candidate");
  }
}

TEST(ComputeGateTest, QueuedTurnLeavesTheQueueWhenReset) {
  ComputeGate gate(1.0);
  ComputeGate::Turn holder = gate.enqueue(true);
  ComputeGate::Turn candidate = gate.enqueue(false);
  ComputeGate::Turn serving = gate.enqueue(true);
  EXPECT_FALSE(candidate.granted());
  EXPECT_EQ(gate.stats().candidate_queued, 1);
  candidate.reset();  // withdraws: share 1 would have given it the next turn
  EXPECT_TRUE(candidate.empty());
  EXPECT_EQ(gate.stats().candidate_queued, 0);
  holder.reset();
  EXPECT_TRUE(serving.granted());
  EXPECT_EQ(gate.stats().contested_grants, 0);
}

TEST(ComputeGateTest, WaitReturnsOnInterruptAndKeepsThePlace) {
  ComputeGate gate(0.25);
  ComputeGate::Turn holder = gate.enqueue(true);
  std::atomic<bool> interrupted{false};
  std::atomic<int> result{-1};
  std::thread waiter([&] {
    ComputeGate::Turn turn = gate.enqueue(false);
    result = turn.wait(&interrupted) ? 1 : 0;
    EXPECT_TRUE(turn.wait());  // granted once the holder leaves
  });
  ASSERT_TRUE(eventually([&] { return gate.stats().candidate_queued == 1; }));
  interrupted = true;
  gate.wake_waiters();
  ASSERT_TRUE(eventually([&] { return result.load() != -1; }));
  EXPECT_EQ(result.load(), 0);
  EXPECT_EQ(gate.stats().candidate_queued, 1);  // the interrupted turn is still queued
  holder.reset();
  waiter.join();
  EXPECT_EQ(gate.stats().candidate_turns, 1);
}

// ---------------------------------------------------------------------------
// The background class (loops whose work is all in-server evaluation).

TEST(ComputeGateTest, BackgroundGetsATurnOnlyWhenNoLiveClassIsQueued) {
  ComputeGate gate(1.0);  // share 1: the candidate would win every contested grant
  ComputeGate::Turn holder = gate.enqueue(GateClass::kServing);
  ComputeGate::Turn background = gate.enqueue(GateClass::kBackground);  // queued first
  ComputeGate::Turn candidate = gate.enqueue(GateClass::kCandidate);
  ComputeGate::Turn serving = gate.enqueue(GateClass::kServing);
  EXPECT_EQ(gate.stats().background_queued, 1);
  holder.reset();
  EXPECT_TRUE(candidate.granted()) << "serving and candidate queued: the share decides, background waits";
  EXPECT_FALSE(background.granted());
  candidate.reset();
  EXPECT_TRUE(serving.granted());
  EXPECT_FALSE(background.granted());
  ComputeGate::Turn again = gate.enqueue(GateClass::kCandidate);  // queued before serving gives back
  serving.reset();
  EXPECT_TRUE(again.granted());
  EXPECT_FALSE(background.granted());
  again.reset();
  EXPECT_TRUE(background.granted()) << "nobody else queued";
  EXPECT_EQ(background.gate_class(), GateClass::kBackground);
  EXPECT_FALSE(background.serving());
  const ComputeGateStats s = gate.stats();
  EXPECT_EQ(s.held_by, GateClass::kBackground);
  EXPECT_FALSE(s.held_by_serving);
  EXPECT_EQ(s.background_turns, 1);
  EXPECT_EQ(s.contested_grants, 1) << "only the serving/candidate grant was contested";
  background.reset();
  EXPECT_FALSE(gate.stats().held);
  EXPECT_GT(gate.stats().background_held_ns, 0);
}

TEST(ComputeGateTest, BackgroundAloneGetsEveryTurnAndLeavesTheShareAlone) {
  ComputeGate gate(0.25);
  for (int i = 0; i < 50; ++i) ComputeGate::Turn turn(gate, GateClass::kBackground);
  // Serving and background queued together: serving wins, uncontested.
  ComputeGate::Turn holder = gate.enqueue(GateClass::kBackground);
  ComputeGate::Turn background = gate.enqueue(GateClass::kBackground);
  ComputeGate::Turn serving = gate.enqueue(GateClass::kServing);
  holder.reset();
  EXPECT_TRUE(serving.granted());
  serving.reset();
  EXPECT_TRUE(background.granted());
  background.reset();
  const ComputeGateStats s = gate.stats();
  EXPECT_EQ(s.background_turns, 52);
  EXPECT_EQ(s.serving_turns, 1);
  EXPECT_EQ(s.contested_grants, 0);
  EXPECT_EQ(s.contested_serving_ns + s.contested_candidate_ns, 0);
  EXPECT_STREQ(gate_class_name(GateClass::kBackground), "background");
}

TEST(ComputeGateTest, ABusyServingCallerKeepsBackgroundWaitingUntilItIdles) {
  ComputeGate gate(0.25);
  constexpr int kServingTurns = 200;
  std::atomic<int64_t> serving_turns_when_background_ran{-1};
  ComputeGate::Turn first = gate.enqueue(GateClass::kServing);
  ASSERT_TRUE(first.granted());
  std::thread background([&] {
    gate.acquire(GateClass::kBackground);
    serving_turns_when_background_ran = gate.stats().serving_turns;
    gate.release();
  });
  ASSERT_TRUE(eventually([&] { return gate.stats().background_queued == 1; }));
  std::thread serving([&] {
    ComputeGate::Turn turn = std::move(first);
    for (int i = 1; i < kServingTurns; ++i) {
      ComputeGate::Turn next = gate.enqueue(GateClass::kServing);  // queued before giving back, as EngineLoop does
      turn = std::move(next);
      EXPECT_TRUE(turn.wait());
    }
  });
  serving.join();
  background.join();
  EXPECT_EQ(serving_turns_when_background_ran.load(), kServingTurns);
}

}  // namespace
}  // namespace loragate
