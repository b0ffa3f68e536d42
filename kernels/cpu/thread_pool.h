// ThreadPool: persistent threads for the CPU kernels' fork/joins, and
// compute_pool(), the one pool the process computes on.
//
// A run is one fork/join: run(n, fn) calls fn(index, count) once for every
// index in [0, count), count = min(n, size()) (n <= 0: size()). Index 0 runs
// on the calling thread, the others on the pool's workers; run() returns when
// every call has returned. Inside fn, ThreadPool::barrier() waits until every
// participant of the run has reached it (all of them must call it equally
// often). Callers must split work so that results do not depend on `count`.
//
// Waiting (a worker between runs, the caller for the end of its run, a
// participant at a barrier): spin for at most spin_us microseconds, pausing
// between polls and calling sched_yield every few polls, then sleep on a
// futex (std::atomic::wait). The spin catches the next run of a decode step
// (tens per step, microseconds apart) without a wake-up; the yields hand the
// core to a peer that shares it; the bound makes an idle pool sleep, so a
// waiter never keeps a core from a descheduled peer or another process for
// long.
//
// Concurrency: one run at a time. run() called while the pool is busy, from
// another thread or from inside a run (nested), does not wait for it: it
// calls fn(0, 1) on the caller, serially. That is only slower, never
// different, and cannot deadlock. Engines that share the pool take turns
// (engine/compute_gate.h), so in serving this fallback is rare.
//
// Exceptions: one escaping fn is caught; its participant leaves the run (the
// others' barriers stop waiting for it) and run() rethrows the first one once
// every participant has returned.
//
// Shutdown: shutdown() (and the destructor) waits for the run in progress,
// then wakes and joins the workers. compute_pool() is shut down at exit and
// never freed, so a thread still computing then keeps working, serially.
#pragma once

#include <memory>
#include <type_traits>

namespace loragate::cpu {

class ThreadPool {
 public:
  // `threads` participants in a full run (the caller and threads - 1
  // workers, at least 1); waiters spin for up to `spin_us` µs (0: sleep at once).
  explicit ThreadPool(int threads, int spin_us);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Participants of a full run (workers + the caller).
  int size() const;
  int spin_us() const;

  // Replaces the workers with threads - 1 new ones. Waits for a run in
  // progress (runs started meanwhile run serially); throws std::logic_error
  // from inside one of this pool's runs or after shutdown().
  void resize(int threads);

  // Joins the workers once the run in progress, if any, has ended; later
  // runs are serial. From inside one of this pool's runs it joins nothing
  // (the workers are left to the process's end). The destructor calls it.
  void shutdown();

  template <class F>
  void run(int nthreads, F&& fn) {
    using Fn = std::remove_reference_t<F>;
    run_erased(nthreads, [](void* f, int index, int count) { (*static_cast<Fn*>(f))(index, count); },
               const_cast<void*>(static_cast<const void*>(std::addressof(fn))));
  }

  // Waits for the other participants of the calling thread's current run; a
  // no-op outside a run and in a serial one.
  static void barrier();

 private:
  using Invoke = void (*)(void* fn, int index, int count);
  struct State;
  void run_erased(int nthreads, Invoke invoke, void* fn);
  std::unique_ptr<State> state_;
};

// Threads for compute_pool(): LORAGATE_THREADS, else OMP_NUM_THREADS (its
// first number), else the CPUs this process may run on (its affinity mask).
int default_compute_threads();

// Spin budget for compute_pool(): LORAGATE_SPIN_US, else 50.
int default_spin_us();

// The process's compute pool, started on first use.
ThreadPool& compute_pool();

}  // namespace loragate::cpu
