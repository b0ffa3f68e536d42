#include "bench/thread_usage.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace loragate::bench {
namespace {

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "voluntary_ctxt_switches:\t12" and its involuntary sibling, from a task's status file.
void read_switches(const std::string& status_path, ThreadCounters& c) {
  std::ifstream in(status_path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t value = 0;
    if (!(fields >> key >> value)) continue;
    if (key == "voluntary_ctxt_switches:") c.voluntary = value;
    if (key == "nonvoluntary_ctxt_switches:") c.involuntary = value;
  }
}

}  // namespace

ThreadSnapshot snapshot_threads(pid_t pid) {
  ThreadSnapshot out;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(tasks, ec)) {
    const std::string dir = entry.path().string();
    ThreadCounters c;
    c.name = first_line(dir + "/comm");
    std::istringstream sched(first_line(dir + "/schedstat"));
    if (c.name.empty() || !(sched >> c.run_ns >> c.wait_ns)) continue;  // it exited meanwhile
    read_switches(dir + "/status", c);
    out[static_cast<pid_t>(std::stol(entry.path().filename().string()))] = c;
  }
  return out;
}

std::vector<NamedUsage> usage_between(const ThreadSnapshot& before, const ThreadSnapshot& after) {
  std::vector<NamedUsage> out;
  for (const auto& [tid, now] : after) {
    ThreadCounters base;
    if (auto it = before.find(tid); it != before.end() && it->second.name == now.name) base = it->second;
    auto it = std::find_if(out.begin(), out.end(), [&](const NamedUsage& u) { return u.name == now.name; });
    if (it == out.end()) it = out.insert(out.end(), NamedUsage{now.name, 0, {now.name, 0, 0, 0, 0}});
    ++it->threads;
    it->delta.run_ns += now.run_ns - base.run_ns;
    it->delta.wait_ns += now.wait_ns - base.wait_ns;
    it->delta.voluntary += now.voluntary - base.voluntary;
    it->delta.involuntary += now.involuntary - base.involuntary;
  }
  return out;
}

void accumulate_usage(std::vector<NamedUsage>& total, const std::vector<NamedUsage>& more) {
  for (const NamedUsage& m : more) {
    auto it = std::find_if(total.begin(), total.end(), [&](const NamedUsage& t) { return t.name == m.name; });
    if (it == total.end()) {
      total.push_back(m);
      continue;
    }
    it->threads = std::max(it->threads, m.threads);  // the same threads, measured again
    it->delta.run_ns += m.delta.run_ns;
    it->delta.wait_ns += m.delta.wait_ns;
    it->delta.voluntary += m.delta.voluntary;
    it->delta.involuntary += m.delta.involuntary;
  }
}

double process_cpu_seconds(pid_t pid) {
  const std::string stat = first_line("/proc/" + std::to_string(pid) + "/stat");
  const size_t comm_end = stat.rfind(')');  // the name may hold spaces and parentheses
  if (comm_end == std::string::npos) return -1;
  std::istringstream fields(stat.substr(comm_end + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {  // field 3 is the state; 14 and 15 are utime and stime
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  const long ticks = ::sysconf(_SC_CLK_TCK);
  return ticks > 0 ? (utime + stime) / static_cast<double>(ticks) : -1;
}

double machine_busy_seconds() {
  std::istringstream fields(first_line("/proc/stat"));  // "cpu  user nice system idle iowait irq softirq steal ..."
  std::string cpu;
  fields >> cpu;
  if (cpu != "cpu") return -1;
  double busy = 0, ticks = 0;
  for (int i = 0; i < 8 && fields >> ticks; ++i) {
    if (i != 3 && i != 4) busy += ticks;  // idle and iowait are not busy
  }
  const long per_second = ::sysconf(_SC_CLK_TCK);
  return per_second > 0 ? busy / static_cast<double>(per_second) : -1;
}

void print_thread_usage(const std::vector<NamedUsage>& usage, double wall_s, const std::string& indent) {
  std::vector<NamedUsage> sorted = usage;
  std::sort(sorted.begin(), sorted.end(),
            [](const NamedUsage& a, const NamedUsage& b) { return a.delta.run_ns > b.delta.run_ns; });
  std::printf("%s%-18s %7s %8s %7s %10s %10s %10s\n", indent.c_str(), "thread", "threads", "cpu s", "of wall",
              "runnable s", "blocks/s", "preempt/s");
  for (const NamedUsage& u : sorted) {
    const ThreadCounters& d = u.delta;
    if (d.run_ns <= 0 && d.voluntary <= 0 && d.involuntary <= 0) continue;
    const double cpu = static_cast<double>(d.run_ns) * 1e-9;
    std::printf("%s%-18s %7d %8.3f %6.1f%% %10.3f %10.1f %10.1f\n", indent.c_str(), u.name.c_str(), u.threads, cpu,
                100.0 * cpu / wall_s, static_cast<double>(d.wait_ns) * 1e-9, static_cast<double>(d.voluntary) / wall_s,
                static_cast<double>(d.involuntary) / wall_s);
  }
}

}  // namespace loragate::bench
