#include "kernels/cpu/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace loragate::cpu {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxThreads = 1024;     // the barrier counts arrivals in 16 bits
constexpr int kDefaultSpinUs = 50;    // ~a few matmuls of a batch-1 decode step
constexpr uint32_t kPollsPerYield = 32;  // about a microsecond of pauses between sched_yield calls

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Waits until done(word) holds and returns the value that satisfied it:
// polls for up to `spin`, yielding the core now and then, then sleeps until
// whoever changes `word` notifies it.
template <class Done>
uint32_t await(const std::atomic<uint32_t>& word, Done done, std::chrono::nanoseconds spin) {
  uint32_t v = word.load(std::memory_order_acquire);
  if (done(v)) return v;
  if (spin.count() > 0) {
    const Clock::time_point deadline = Clock::now() + spin;
    for (uint32_t polls = 1;; ++polls) {
      cpu_relax();
      v = word.load(std::memory_order_acquire);
      if (done(v)) return v;
      if (polls % kPollsPerYield == 0) {
        if (Clock::now() >= deadline) break;
        sched_yield();  // a peer (or another process) on this core may be what we wait for
      }
    }
  }
  for (;;) {
    word.wait(v, std::memory_order_acquire);
    v = word.load(std::memory_order_acquire);
    if (done(v)) return v;
  }
}

// The barrier of a run. `word` holds the phase (high 16 bits) and how many
// participants have arrived in it (low 16 bits); `members` are the run's
// participants that have not left it by throwing.
struct Team {
  alignas(64) std::atomic<uint32_t> word{0};
  std::atomic<int> members{0};
  std::chrono::nanoseconds spin{0};

  void start(int count) {
    word.store(0, std::memory_order_relaxed);
    members.store(count, std::memory_order_relaxed);
  }

  void arrive() {
    const uint32_t seen = word.fetch_add(1) + 1;
    if (try_release(seen)) return;
    const uint32_t phase = seen >> 16;
    await(word, [phase](uint32_t v) { return v >> 16 != phase; }, spin);
  }

  // A participant that threw: the barriers of the others stop counting it.
  void leave() {
    members.fetch_sub(1);
    try_release(word.load());
  }

  // Opens the barrier of `seen`'s phase once every member has arrived in it.
  // Arrivals and leaves are sequentially consistent, so of an arrival and a
  // leave that race, at least one sees the other and opens it.
  bool try_release(uint32_t seen) {
    const uint32_t phase = seen >> 16;
    uint32_t cur = seen;
    while (cur >> 16 == phase && static_cast<int>(cur & 0xffff) >= members.load()) {
      if (word.compare_exchange_weak(cur, ((phase + 1) & 0xffff) << 16)) {
        word.notify_all();
        return true;
      }
    }
    return false;
  }
};

// The run the calling thread takes part in (for barrier()): null outside a
// run and inside a serial one.
thread_local Team* tl_team = nullptr;

struct alignas(64) Worker {
  std::atomic<uint32_t> runs{0};  // bumped to hand the worker a run, or to stop it
  std::thread thread;
};

}  // namespace

struct ThreadPool::State {
  std::chrono::nanoseconds spin{0};
  std::atomic<int> size{1};
  std::atomic<bool> busy{false};  // held by a run, a resize or (for good) shutdown
  std::atomic<bool> shut_down{false};
  std::atomic<bool> stopping{false};  // read by workers woken without a run
  std::vector<std::unique_ptr<Worker>> workers;  // workers[i - 1] runs index i

  // The current run, written by its caller before it hands the run out.
  Invoke invoke = nullptr;
  void* fn = nullptr;
  int count = 0;
  alignas(64) std::atomic<uint32_t> pending{0};  // workers still in the run
  Team team;
  std::mutex error_mu;
  std::exception_ptr error;  // the run's first exception; guarded by error_mu

  // The pool whose run the calling thread takes part in (resize and
  // shutdown must not wait for the run they are called from).
  static thread_local const State* in_run_of;

  void start_workers(int threads) {
    threads = std::clamp(threads, 1, kMaxThreads);
    workers.reserve(static_cast<size_t>(threads - 1));
    for (int i = 1; i < threads; ++i) {
      auto w = std::make_unique<Worker>();
      try {
        w->thread = std::thread(&State::worker_main, this, i, w.get());
      } catch (const std::system_error&) {
        break;  // out of threads: compute with those we have
      }
      workers.push_back(std::move(w));
    }
    size.store(static_cast<int>(workers.size()) + 1, std::memory_order_relaxed);
  }

  void stop_workers() {
    stopping.store(true, std::memory_order_relaxed);
    for (auto& w : workers) {
      w->runs.fetch_add(1, std::memory_order_release);
      w->runs.notify_one();
    }
    for (auto& w : workers) w->thread.join();
    workers.clear();
    stopping.store(false, std::memory_order_relaxed);
    size.store(1, std::memory_order_relaxed);
  }

  void worker_main(int index, Worker* self) {
    const std::string name = "lg-compute-" + std::to_string(index);
    pthread_setname_np(pthread_self(), name.c_str());
    uint32_t seen = 0;
    for (;;) {
      seen = await(self->runs, [seen](uint32_t v) { return v != seen; }, spin);
      if (stopping.load(std::memory_order_relaxed)) return;
      participate(index);
      if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) pending.notify_one();
    }
  }

  void participate(int index) {
    Team* const outer_team = std::exchange(tl_team, &team);
    const State* const outer_run = std::exchange(in_run_of, this);
    try {
      invoke(fn, index, count);
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
      }
      team.leave();
    }
    tl_team = outer_team;
    in_run_of = outer_run;
  }

  static void run_serially(Invoke serial_invoke, void* serial_fn) {
    // A serial run has no barrier partners: hide any outer run's team.
    struct Restore {
      Team* team;
      ~Restore() { tl_team = team; }
    } restore{std::exchange(tl_team, nullptr)};
    serial_invoke(serial_fn, 0, 1);
  }

  // Takes the pool for a resize or shutdown, once the run in progress ends.
  void take_exclusively(const char* what) {
    if (in_run_of == this) throw std::logic_error(std::string("ThreadPool::") + what + " from inside a run");
    while (busy.exchange(true, std::memory_order_acquire)) {
      if (shut_down.load()) throw std::logic_error(std::string("ThreadPool::") + what + " after shutdown");
      std::this_thread::yield();
    }
    if (shut_down.load()) throw std::logic_error(std::string("ThreadPool::") + what + " after shutdown");
  }
};

thread_local const ThreadPool::State* ThreadPool::State::in_run_of = nullptr;

ThreadPool::ThreadPool(int threads, int spin_us) : state_(std::make_unique<State>()) {
  state_->spin = std::chrono::microseconds(std::max(spin_us, 0));
  state_->team.spin = state_->spin;
  state_->start_workers(threads);
}

ThreadPool::~ThreadPool() { shutdown(); }

int ThreadPool::size() const { return state_->size.load(std::memory_order_relaxed); }

int ThreadPool::spin_us() const {
  return static_cast<int>(std::chrono::duration_cast<std::chrono::microseconds>(state_->spin).count());
}

void ThreadPool::resize(int threads) {
  State& s = *state_;
  s.take_exclusively("resize");
  s.stop_workers();
  s.start_workers(threads);
  s.busy.store(false, std::memory_order_release);
}

void ThreadPool::shutdown() {
  State& s = *state_;
  if (s.shut_down.load() || State::in_run_of == &s) return;
  while (s.busy.exchange(true, std::memory_order_acquire)) {
    if (s.shut_down.load()) return;
    std::this_thread::yield();
  }
  s.stop_workers();
  s.shut_down.store(true);  // busy stays held: every later run is serial
}

void ThreadPool::barrier() {
  if (Team* team = tl_team) team->arrive();
}

void ThreadPool::run_erased(int nthreads, Invoke invoke, void* fn) {
  State& s = *state_;
  if (nthreads == 1 || s.busy.exchange(true, std::memory_order_acquire)) return s.run_serially(invoke, fn);
  const int size = s.size.load(std::memory_order_relaxed);
  const int count = nthreads <= 0 ? size : std::min(nthreads, size);
  if (count <= 1) {
    s.busy.store(false, std::memory_order_release);
    return s.run_serially(invoke, fn);
  }

  s.invoke = invoke;
  s.fn = fn;
  s.count = count;
  s.team.start(count);
  s.pending.store(static_cast<uint32_t>(count - 1), std::memory_order_relaxed);
  for (int i = 1; i < count; ++i) {
    Worker& w = *s.workers[static_cast<size_t>(i - 1)];
    w.runs.fetch_add(1, std::memory_order_release);
    w.runs.notify_one();
  }
  s.participate(0);
  await(s.pending, [](uint32_t v) { return v == 0; }, s.spin);
  std::exception_ptr error = std::exchange(s.error, nullptr);  // every participant is done
  s.busy.store(false, std::memory_order_release);
  if (error) std::rethrow_exception(error);
}

// ---- The process's pool -----------------------------------------------------

namespace {

// A whole number in [lo, hi] from environment variable `name` (for a list
// such as OMP_NUM_THREADS=4,2, its first element); nullopt when unset. An
// invalid value is reported on stderr and ignored.
std::optional<int> int_from_env(const char* name, int lo, int hi) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end != text && (*end == '\0' || *end == ',') && v >= lo && v <= hi) return static_cast<int>(v);
  std::fprintf(stderr, "loragate: ignoring %s=%s (expected a whole number in [%d, %d])\n", name, text, lo, hi);
  return std::nullopt;
}

int cpus_available() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace

int default_compute_threads() {
  if (std::optional<int> n = int_from_env("LORAGATE_THREADS", 1, kMaxThreads)) return *n;
  if (std::optional<int> n = int_from_env("OMP_NUM_THREADS", 1, kMaxThreads)) return *n;
  return cpus_available();
}

int default_spin_us() { return int_from_env("LORAGATE_SPIN_US", 0, 1000000).value_or(kDefaultSpinUs); }

ThreadPool& compute_pool() {
  // Never freed, so a thread that computes during exit still finds it (and
  // runs serially); its workers are joined at exit.
  static ThreadPool* const pool = [] {
    auto* p = new ThreadPool(default_compute_threads(), default_spin_us());
    std::atexit([] { compute_pool().shutdown(); });
    return p;
  }();
  return *pool;
}

}  // namespace loragate::cpu
