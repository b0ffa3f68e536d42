// ThreadPool: every index of a run once, barriers that order phases, callers
// on several threads and nested runs (serial fallback), exceptions, resize
// and shutdown, the environment knobs, and an idle pool that sleeps.
#include "kernels/cpu/thread_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace loragate::cpu {
namespace {

constexpr int kSpinUs = 50;

// Runs fn once and returns how often each index ran and the counts seen.
struct RunRecord {
  std::vector<int> hits;
  std::vector<int> counts;
};

RunRecord record_run(ThreadPool& pool, int nthreads, int max_index) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(max_index)), counts(static_cast<size_t>(max_index));
  pool.run(nthreads, [&](int index, int count) {
    hits[static_cast<size_t>(index)].fetch_add(1);
    counts[static_cast<size_t>(index)].store(count);
  });
  RunRecord r;
  for (int i = 0; i < max_index; ++i) {
    r.hits.push_back(hits[static_cast<size_t>(i)].load());
    r.counts.push_back(counts[static_cast<size_t>(i)].load());
  }
  return r;
}

TEST(ThreadPoolTest, EveryIndexRunsExactlyOnceForManyThreadCounts) {
  for (int size : {1, 2, 3, 5, 8}) {
    ThreadPool pool(size, kSpinUs);
    ASSERT_EQ(pool.size(), size);
    for (int n = -1; n <= size + 2; ++n) {
      SCOPED_TRACE(::testing::Message() << "pool of " << size << ", run(" << n << ")");
      const int expected = n <= 0 ? size : std::min(n, size);
      for (int rep = 0; rep < 20; ++rep) {
        const RunRecord r = record_run(pool, n, size + 2);
        for (int i = 0; i < size + 2; ++i) {
          ASSERT_EQ(r.hits[static_cast<size_t>(i)], i < expected ? 1 : 0) << "index " << i;
          if (i < expected) {
            ASSERT_EQ(r.counts[static_cast<size_t>(i)], expected) << "index " << i;
          }
        }
      }
    }
  }
}

TEST(ThreadPoolTest, IndexZeroRunsOnTheCallerAndWorkersAreNamed) {
  ThreadPool pool(4, kSpinUs);
  std::vector<std::thread::id> ids(4);
  std::vector<std::string> names(4);
  pool.run(4, [&](int index, int) {
    ids[static_cast<size_t>(index)] = std::this_thread::get_id();
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof(name));
    names[static_cast<size_t>(index)] = name;
  });
  EXPECT_EQ(ids[0], std::this_thread::get_id());
  for (int i = 1; i < 4; ++i) {
    EXPECT_NE(ids[static_cast<size_t>(i)], ids[0]);
    EXPECT_EQ(names[static_cast<size_t>(i)], "lg-compute-" + std::to_string(i));
  }
}

// Each participant writes its cell of a phase, waits at the barrier, then
// reads every cell of that phase: any cell unwritten means a participant
// left the barrier early. Plain (non-atomic) cells: the barrier must order them.
void check_barrier_orders_phases(ThreadPool& pool, int nthreads, int phases, std::atomic<int>& early) {
  std::vector<std::vector<int>> cells(static_cast<size_t>(phases), std::vector<int>(static_cast<size_t>(pool.size())));
  pool.run(nthreads, [&](int index, int count) {
    for (int p = 0; p < phases; ++p) {
      cells[static_cast<size_t>(p)][static_cast<size_t>(index)] = p + 1;
      ThreadPool::barrier();
      for (int i = 0; i < count; ++i) {
        if (cells[static_cast<size_t>(p)][static_cast<size_t>(i)] != p + 1) early.fetch_add(1);
      }
    }
  });
}

TEST(ThreadPoolTest, BarrierOrdersPhases) {
  for (int size : {2, 3, 4, 7}) {
    ThreadPool pool(size, kSpinUs);
    std::atomic<int> early{0};
    for (int rep = 0; rep < 5; ++rep) check_barrier_orders_phases(pool, 0, 100, early);
    EXPECT_EQ(early.load(), 0) << "pool of " << size;
  }
  ThreadPool sleepy(3, 0);  // no spin: every wait sleeps on the futex
  std::atomic<int> early{0};
  check_barrier_orders_phases(sleepy, 0, 100, early);
  EXPECT_EQ(early.load(), 0);
}

TEST(ThreadPoolTest, BarrierIsANoOpOutsideARunAndInASerialRun) {
  ThreadPool::barrier();
  ThreadPool pool(4, kSpinUs);
  int calls = 0;
  pool.run(1, [&](int, int count) {
    EXPECT_EQ(count, 1);
    ThreadPool::barrier();
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPoolTest, ANestedRunIsSerialAndTheOuterBarrierStillWorks) {
  ThreadPool pool(3, kSpinUs);
  std::atomic<int> inner_runs{0}, bad_counts{0}, early{0};
  std::vector<int> cells(3, 0);
  pool.run(3, [&](int index, int count) {
    pool.run(0, [&](int inner_index, int inner_count) {
      if (inner_index != 0 || inner_count != 1) bad_counts.fetch_add(1);
      ThreadPool::barrier();  // the serial run's: must not meet the outer run's barrier
      inner_runs.fetch_add(1);
    });
    cells[static_cast<size_t>(index)] = 1;
    ThreadPool::barrier();
    for (int i = 0; i < count; ++i) {
      if (cells[static_cast<size_t>(i)] != 1) early.fetch_add(1);
    }
  });
  EXPECT_EQ(inner_runs.load(), 3);
  EXPECT_EQ(bad_counts.load(), 0);
  EXPECT_EQ(early.load(), 0);
}

// Several threads call run() on one pool at once: each run is either the
// pool's (count = its size) or serial (count = 1), and computes the right
// answer either way, barrier included.
TEST(ThreadPoolTest, ConcurrentCallersGetCorrectResults) {
  ThreadPool pool(3, kSpinUs);
  constexpr int kCallers = 4, kRuns = 300;
  constexpr int64_t kN = 1000;
  std::atomic<int> wrong{0}, pooled{0}, serial{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      std::vector<int64_t> values(kN), partial(static_cast<size_t>(pool.size()));
      for (int r = 0; r < kRuns; ++r) {
        std::atomic<int64_t> total{0};
        std::atomic<int> count_seen{0};
        pool.run(0, [&](int index, int count) {
          count_seen.store(count);
          const int64_t lo = kN * index / count, hi = kN * (index + 1) / count;
          for (int64_t i = lo; i < hi; ++i) values[static_cast<size_t>(i)] = i * (c + 1) + r;
          ThreadPool::barrier();
          // Sum a different part than this participant wrote: needs the barrier.
          const int other = (index + 1) % count;
          const int64_t olo = kN * other / count, ohi = kN * (other + 1) / count;
          int64_t sum = 0;
          for (int64_t i = olo; i < ohi; ++i) sum += values[static_cast<size_t>(i)];
          total.fetch_add(sum);
        });
        const int64_t expected = (kN * (kN - 1) / 2) * (c + 1) + kN * r;
        if (total.load() != expected) wrong.fetch_add(1);
        const int n = count_seen.load();
        if (n == pool.size()) {
          pooled.fetch_add(1);
        } else if (n == 1) {
          serial.fetch_add(1);
        } else {
          wrong.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(pooled.load() + serial.load(), kCallers * kRuns);
  EXPECT_GT(pooled.load(), 0);
}

TEST(ThreadPoolTest, AnExceptionIsRethrownOnceEveryParticipantHasReturned) {
  ThreadPool pool(4, kSpinUs);
  for (int thrower : {0, 2}) {
    SCOPED_TRACE(::testing::Message() << "index " << thrower << " throws");
    std::atomic<int> finished{0};
    try {
      pool.run(4, [&](int index, int) {
        if (index == thrower) throw std::runtime_error("boom " + std::to_string(index));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        finished.fetch_add(1);
      });
      ADD_FAILURE() << "run() did not throw";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "boom " + std::to_string(thrower));
    }
    EXPECT_EQ(finished.load(), 3);
  }
  // The pool is still whole.
  const RunRecord r = record_run(pool, 4, 4);
  EXPECT_EQ(r.hits, std::vector<int>(4, 1));
}

// A participant that throws before a barrier leaves the run: the others'
// barriers (this one and later ones) no longer wait for it.
TEST(ThreadPoolTest, AThrowerLeavesTheRunsBarriers) {
  ThreadPool pool(4, kSpinUs);
  for (int rep = 0; rep < 20; ++rep) {
    std::atomic<int> passed{0};
    EXPECT_THROW(pool.run(4,
                          [&](int index, int) {
                            if (index == 1 + rep % 3) throw std::logic_error("leaving");
                            for (int b = 0; b < 3; ++b) ThreadPool::barrier();
                            passed.fetch_add(1);
                          }),
                 std::logic_error);
    EXPECT_EQ(passed.load(), 3);
  }
}

TEST(ThreadPoolTest, ResizeChangesTheWorkersAndRefusesFromInsideARun) {
  ThreadPool pool(2, kSpinUs);
  pool.resize(5);
  EXPECT_EQ(pool.size(), 5);
  EXPECT_EQ(record_run(pool, 0, 5).hits, std::vector<int>(5, 1));
  pool.resize(1);
  EXPECT_EQ(pool.size(), 1);
  EXPECT_EQ(record_run(pool, 0, 2).hits, (std::vector<int>{1, 0}));
  pool.resize(3);
  std::atomic<int> refused{0};
  pool.run(3, [&](int index, int) {
    if (index != 0) return;
    try {
      pool.resize(2);
    } catch (const std::logic_error&) {
      refused.fetch_add(1);
    }
  });
  EXPECT_EQ(refused.load(), 1);
  EXPECT_EQ(pool.size(), 3);
}

TEST(ThreadPoolTest, AfterShutdownRunsAreSerial) {
  ThreadPool pool(4, kSpinUs);
  pool.shutdown();
  EXPECT_EQ(pool.size(), 1);
  const RunRecord r = record_run(pool, 4, 4);
  EXPECT_EQ(r.hits, (std::vector<int>{1, 0, 0, 0}));
  EXPECT_EQ(r.counts[0], 1);
  pool.shutdown();  // twice is fine
  EXPECT_THROW(pool.resize(2), std::logic_error);
}

// The knobs, read whenever asked (the process pool reads them once).
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~EnvVar() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(ThreadPoolTest, ThreadCountComesFromLoragateThreadsThenOmpNumThreads) {
  {
    EnvVar lg("LORAGATE_THREADS", nullptr), omp("OMP_NUM_THREADS", nullptr);
    const int cpus = default_compute_threads();
    EXPECT_GE(cpus, 1);
    {
      EnvVar omp_list("OMP_NUM_THREADS", "3,2");
      EXPECT_EQ(default_compute_threads(), 3);
      EnvVar lg_set("LORAGATE_THREADS", "5");
      EXPECT_EQ(default_compute_threads(), 5);
    }
    EnvVar lg_bad("LORAGATE_THREADS", "lots"), omp_bad("OMP_NUM_THREADS", "0");  // invalid: ignored
    EXPECT_EQ(default_compute_threads(), cpus);
  }
  {
    EnvVar spin("LORAGATE_SPIN_US", nullptr);
    EXPECT_EQ(default_spin_us(), 50);
    EnvVar spin_set("LORAGATE_SPIN_US", "0");
    EXPECT_EQ(default_spin_us(), 0);
  }
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Once the spin budget has passed, idle workers sleep: the process's CPU
// time stays flat while nothing runs (spinning workers would add ~200 ms each).
TEST(ThreadPoolTest, AnIdlePoolSleeps) {
  ThreadPool pool(4, kSpinUs);
  std::atomic<int64_t> sink{0};
  for (int r = 0; r < 100; ++r) {
    pool.run(0, [&](int index, int) { sink.fetch_add(index); });
  }
  compute_pool().run(0, [&](int index, int) { sink.fetch_add(index); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past every spin budget
  const double before = process_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double used = process_cpu_seconds() - before;
  EXPECT_LT(used, 0.02) << "CPU seconds used by an idle process over 200 ms";
  EXPECT_EQ(sink.load(), 100 * 6 + compute_pool().size() * (compute_pool().size() - 1) / 2);
}

}  // namespace
}  // namespace loragate::cpu
