// Per-thread CPU accounting of a process, read from /proc: where the CPU time
// of a benchmark went, by thread name (lg-step, lg-compute-N, the network
// threads...), and how long each thread waited, runnable, for a core.
//
//   ThreadSnapshot before = snapshot_threads(pid);
//   ... the work ...
//   print_thread_usage(usage_between(before, snapshot_threads(pid)), wall_s);
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loragate::bench {

struct ThreadCounters {
  std::string name;             // comm: what pthread_setname_np set, else the executable's name
  int64_t run_ns = 0;           // on a CPU (schedstat)
  int64_t wait_ns = 0;          // runnable, waiting for a CPU (schedstat)
  int64_t voluntary = 0;        // context switches: blocked (a futex, a read, a sleep)
  int64_t involuntary = 0;      // context switches: preempted
};

// Every thread of `pid` now, by thread id (threads that exit meanwhile are skipped).
using ThreadSnapshot = std::map<pid_t, ThreadCounters>;
ThreadSnapshot snapshot_threads(pid_t pid);

// Growth between two snapshots, summed over threads of the same name.
// A thread that began after `before` counts from zero.
struct NamedUsage {
  std::string name;
  int threads = 0;
  ThreadCounters delta;
};
std::vector<NamedUsage> usage_between(const ThreadSnapshot& before, const ThreadSnapshot& after);

// Adds `more` into `total`, by name.
void accumulate_usage(std::vector<NamedUsage>& total, const std::vector<NamedUsage>& more);

// CPU seconds (user + system) of every thread `pid` has had, those that
// ended included (the kernel folds them into the process); -1 if unreadable.
// Clock-tick resolution (10 ms on most kernels).
double process_cpu_seconds(pid_t pid);

// CPU seconds every core of the machine spent busy (not idle, not waiting on
// I/O) since boot, from /proc/stat, for what other processes took
// meanwhile; -1 if unreadable.
double machine_busy_seconds();

// One line per thread name, busiest first: CPU seconds and their share of
// `wall_s`, runnable-wait seconds, context switches per second. Names with
// no time and no switches are left out.
void print_thread_usage(const std::vector<NamedUsage>& usage, double wall_s, const std::string& indent);

}  // namespace loragate::bench
