// `loragate bench serve-gap`: the same workload through the engine in this
// process and through `loragate serve` over HTTP, interleaved over reps, with
// tokens/s, CPU per token and a token-for-token comparison of the two sides.
// The sides are in serve_gap_sides.h; here: the workload, the serve child's
// config, the checks and the report.
#include "bench/serve_gap_bench.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "adapters/synth_adapter.h"
#include "bench/bench_util.h"
#include "bench/serve_child.h"
#include "bench/serve_gap_sides.h"
#include "bench/thread_usage.h"
#include "client/http_client.h"
#include "engine/compute_gate.h"
#include "engine/engine_loop.h"
#include "kernels/cpu/thread_pool.h"

namespace loragate::bench {
namespace serve_gap_detail {

std::string adapter_name(int i) { return "gap-" + std::to_string(i); }

// The naming and seeds of `bench lora`'s adapters, so that the two benchmarks can share a directory.
std::string adapter_dir(const std::string& root, int i) {
  return root + "/r" + std::to_string(kAdapterRank) + "-all-" + std::to_string(i);
}

// What `loragate serve` runs its base with: ServeConfig's defaults (a default
// EngineOptions), the dtype, and enough adapter slots for every adapter of
// the run to share each step (serve's default of 4 would make both sides
// take turns by adapter), with prefix caching off. The child's config sets
// exactly these keys.
EngineOptions serve_engine_options(const ServeGapOptions& o) {
  EngineOptions eo;
  eo.weight_dtype = parse_weight_type(o.dtype).value();  // checked by run_serve_gap_bench
  eo.max_loras = std::max(eo.max_loras, o.adapters);
  eo.prefix_caching = false;  // every rep repeats the workload: both sides compute every prompt
  return eo;
}

namespace {

using nlohmann::json;

Workload make_workload(const ServeGapOptions& o, int64_t vocab) {
  Workload w;
  w.new_tokens = o.new_tokens;
  for (int i = 0; i < o.requests; ++i) {
    w.prompts.push_back(synthetic_prompt(o.prompt_len, vocab, i));
    w.adapters.push_back(o.adapters > 0 ? adapter_name(i % o.adapters) : std::string());
  }
  return w;
}

Status ensure_adapters(const ServeGapOptions& o, const ModelConfig& base) {
  int written = 0;
  for (int i = 0; i < o.adapters; ++i) {
    const std::string dir = adapter_dir(o.adapters_dir, i);
    if (std::filesystem::exists(dir + "/adapter_model.safetensors")) continue;
    SynthAdapterOptions a;
    a.rank = kAdapterRank;
    a.lora_alpha = 2.0 * kAdapterRank;
    a.seed = static_cast<uint64_t>(1000 + i);
    LG_RETURN_IF_ERROR(write_synth_adapter(dir, base, a));  // all seven projections by default
    ++written;
  }
  if (written > 0) {
    std::printf("wrote %d synthetic rank-%d adapters under %s\n", written, kAdapterRank, o.adapters_dir.c_str());
  }
  return Status::ok();
}

// --- the serve child's configuration --------------------------------------------

// A scratch directory for the child's config and registry, removed at the end.
class ScratchDir {
 public:
  static Result<ScratchDir> make() {
    std::string pattern = (std::filesystem::temp_directory_path() / "lg-serve-gap-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) return Status::io_error("cannot make a directory like " + pattern);
    return ScratchDir(pattern);
  }
  ScratchDir(ScratchDir&& other) noexcept : path_(std::exchange(other.path_, "")) {}
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

std::string quoted(const std::string& s) { return json(s).dump(); }  // a JSON string is a YAML double-quoted one

// The YAML for the child: the engine options of serve_engine_options() (every other key at its default),
// the adapters preloaded under their names, and a registry of its own.
Result<std::string> write_serve_config(const ServeGapOptions& o, const std::string& scratch) {
  const EngineOptions eo = serve_engine_options(o);
  const std::string model = std::filesystem::absolute(o.model_dir).lexically_normal().string();
  std::string y = "# written by loragate bench serve-gap\n";
  y += "server:\n  host: 127.0.0.1\n  port: " + std::to_string(o.port) + "\n";
  y += "model:\n  path: " + quoted(model) + "\n  served_name: " + kServedName + "\n  dtype: " + o.dtype + "\n";
  y += "engine:\n  max_loras: " + std::to_string(eo.max_loras) + "\n  prefix_caching: false\n";
  y += "adapters:\n  registry: " + quoted(scratch + "/registry.db") + "\n";
  if (o.adapters > 0) {
    const std::string root = std::filesystem::absolute(o.adapters_dir).lexically_normal().string();
    y += "  roots: [" + quoted(root) + "]\n  preload:\n";
    for (int i = 0; i < o.adapters; ++i) {
      y += "    - name: " + adapter_name(i) + "\n      path: " + quoted(adapter_dir(root, i)) + "\n";
    }
  }
  y += "demo:\n  dir: " + quoted(scratch + "/demo") + "\n";
  const std::string path = scratch + "/serve-gap.yaml";
  std::ofstream out(path);
  out << y;
  if (!out.flush()) return Status::io_error("cannot write " + path);
  return path;
}

Result<std::string> this_executable() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return Status::io_error("cannot read /proc/self/exe: " + ec.message());
  return exe.string();
}

// --- checks and the report ----------------------------------------------------

Status check_options(const ServeGapOptions& o) {
  LG_RETURN_IF_ERROR(parse_weight_type(o.dtype).status());
  if (o.requests < 1 || o.prompt_len < 1 || o.new_tokens < 1 || o.reps < 1 || o.adapters < 0) {
    return Status::invalid_argument("--requests, --prompt-len, --new-tokens and --reps must be >= 1, --adapters >= 0");
  }
  if (!std::filesystem::is_regular_file(std::filesystem::path(o.model_dir) / "config.json")) {
    return Status::not_found("model directory '" + o.model_dir + "' has no config.json (make one with: loragate "
                             "synth-model --out " + o.model_dir + " --preset 110m --seed 1)");
  }
  return Status::ok();
}

// The ways the two sides' outputs of one repetition disagree with the workload or each other.
std::vector<std::string> compare_outputs(const SideRun& engine, const SideRun& http, const Workload& w, int rep) {
  std::vector<std::string> problems;
  const std::string where = "rep " + std::to_string(rep + 1) + ", request ";
  for (size_t i = 0; i < w.size(); ++i) {
    if (engine.tokens[i] != w.new_tokens || http.tokens[i] != w.new_tokens) {
      problems.push_back(where + std::to_string(i) + ": generated " + std::to_string(engine.tokens[i]) +
                         " tokens in the engine, " + std::to_string(http.tokens[i]) + " over HTTP, not " +
                         std::to_string(w.new_tokens));
    } else if (engine.text[i] != http.text[i]) {
      problems.push_back(where + std::to_string(i) + ": the engine and HTTP texts differ (greedy: they should not)");
    }
  }
  return problems;
}

std::string load_average() {
  double load[3] = {0, 0, 0};
  if (::getloadavg(load, 3) != 3) return "unknown";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %.2f %.2f", load[0], load[1], load[2]);
  return buf;
}

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

// CPU time by thread of both processes, over the runs of one side.
struct SideUsage {
  std::vector<NamedUsage> self, child;
  double wall_s = 0;
  double self_cpu_s = 0, child_cpu_s = 0;  // every thread, those that ended too
  double others_cpu_s = 0;                 // what the rest of the machine ran meanwhile
  int64_t tokens = 0;
};

// Microseconds of CPU per generated token.
double us_per_token(double cpu_s, int64_t tokens) { return tokens > 0 ? cpu_s * 1e6 / static_cast<double>(tokens) : 0; }

}  // namespace
}  // namespace serve_gap_detail

Status run_serve_gap_bench(const ServeGapOptions& o) {
  using namespace serve_gap_detail;
  LG_RETURN_IF_ERROR(check_options(o));
  LG_ASSIGN_OR_RETURN(ModelConfig base, ModelConfig::load(o.model_dir));
  if (o.adapters > 0) LG_RETURN_IF_ERROR(ensure_adapters(o, base));
  const Workload workload = make_workload(o, base.vocab_size);
  LG_ASSIGN_OR_RETURN(ScratchDir scratch, ScratchDir::make());
  LG_ASSIGN_OR_RETURN(std::string config, write_serve_config(o, scratch.path()));
  std::string exe = o.executable;
  if (exe.empty()) {
    LG_ASSIGN_OR_RETURN(exe, this_executable());
  }

  std::printf("loragate serve-gap: %s weights, %d concurrent requests (prompt %d, %d new tokens each), %s, %d reps\n",
              o.dtype.c_str(), o.requests, o.prompt_len, o.new_tokens,
              o.adapters > 0 ? (std::to_string(o.adapters) + " distinct rank-16 adapters round-robin").c_str()
                             : "base model only",
              o.reps);
  std::printf("compute threads %d (both processes), load average %s at the start\n", cpu::default_compute_threads(),
              load_average().c_str());
  std::fflush(stdout);

  // Both load at once: the child in its process, the engine side on a thread of this one.
  auto engine_loading = std::async(std::launch::async, [&o] { return EngineSide::load(o); });
  Result<std::unique_ptr<ServeChild>> started =
      ServeChild::start(exe, {"--config", config}, std::chrono::seconds(600));
  Result<std::unique_ptr<EngineSide>> loaded = engine_loading.get();
  LG_RETURN_IF_ERROR(started.status());
  LG_RETURN_IF_ERROR(loaded.status().with_context("engine side"));
  ServeChild& child = **started;
  EngineSide& engine = **loaded;
  LG_ASSIGN_OR_RETURN(std::unique_ptr<HttpSide> http, HttpSide::connect(child.url(), workload.size(), o.stream));
  std::printf("engine side: Engine + EngineLoop + ComputeGate in this process (pid %d)\n",
              static_cast<int>(::getpid()));
  std::printf("HTTP side:   loragate serve (pid %d) on %s, %s /v1/completions, one connection per request\n",
              static_cast<int>(child.pid()), child.url().c_str(), o.stream ? "streamed (SSE)" : "non-streaming");

  // An HTTP failure may be the child's: its last words go with the error.
  auto http_failure = [&child](const Status& s, const std::string& when) {
    std::string tail = child.output_tail();
    if (tail.size() > 2000) tail = "..." + tail.substr(tail.size() - 2000);
    return Status::unavailable(s.with_context(when).to_string() + "; the serve child's output ends with:\n" + tail);
  };

  // Warm-up, unmeasured: adapters reach their slots, connections open, pages fault in.
  LG_RETURN_IF_ERROR(engine.run(workload).status().with_context("warm-up"));
  if (Status s = http->run(workload).status(); !s.is_ok()) return http_failure(s, "warm-up");

  std::vector<double> engine_tps, http_tps, ratios;
  std::vector<std::string> problems;
  SideUsage engine_usage, http_usage;
  std::printf("\n%-4s %-12s %12s %12s %12s %14s\n", "rep", "order", "engine t/s", "http t/s", "http/engine",
              "steps eng/http");
  for (int rep = 0; rep < o.reps; ++rep) {
    const bool engine_first = rep % 2 == 0;
    SideRun runs[2];  // [0] engine, [1] HTTP
    for (int k = 0; k < 2; ++k) {
      const bool is_engine = (k == 0) == engine_first;
      const ThreadSnapshot self_before = snapshot_threads(::getpid()), child_before = snapshot_threads(child.pid());
      const double self_cpu = process_cpu_seconds(::getpid()), child_cpu = process_cpu_seconds(child.pid());
      const double machine_cpu = machine_busy_seconds();
      Result<SideRun> r = is_engine ? engine.run(workload) : http->run(workload);
      if (!r.is_ok() && is_engine) return r.status().with_context("rep " + std::to_string(rep + 1));
      if (!r.is_ok()) return http_failure(r.status(), "rep " + std::to_string(rep + 1));
      SideUsage& usage = is_engine ? engine_usage : http_usage;
      const double self_used = process_cpu_seconds(::getpid()) - self_cpu;
      const double child_used = process_cpu_seconds(child.pid()) - child_cpu;
      usage.self_cpu_s += self_used;
      usage.child_cpu_s += child_used;
      usage.others_cpu_s += std::max(0.0, machine_busy_seconds() - machine_cpu - self_used - child_used);
      accumulate_usage(usage.self, usage_between(self_before, snapshot_threads(::getpid())));
      accumulate_usage(usage.child, usage_between(child_before, snapshot_threads(child.pid())));
      usage.wall_s += r->wall_s;
      usage.tokens += r->total_tokens();
      runs[is_engine ? 0 : 1] = std::move(r).value();
    }
    engine_tps.push_back(runs[0].tokens_per_s());
    http_tps.push_back(runs[1].tokens_per_s());
    ratios.push_back(http_tps.back() / engine_tps.back());
    std::printf("%-4d %-12s %12.1f %12.1f %12.3f %9lld/%lld\n", rep + 1, engine_first ? "engine,http" : "http,engine",
                engine_tps.back(), http_tps.back(), ratios.back(), static_cast<long long>(runs[0].steps),
                static_cast<long long>(runs[1].steps));
    std::fflush(stdout);
    for (std::string& p : compare_outputs(runs[0], runs[1], workload, rep)) problems.push_back(std::move(p));
  }

  std::printf("\n%-8s %14s %10s %10s\n", "side", "median t/s", "min", "max");
  std::printf("%-8s %14.1f %10.1f %10.1f\n", "engine", median(engine_tps), min_of(engine_tps), max_of(engine_tps));
  std::printf("%-8s %14.1f %10.1f %10.1f\n", "http", median(http_tps), min_of(http_tps), max_of(http_tps));
  std::printf("ratio http/engine: %.3f (of the medians); per-rep ratios: median %.3f, min %.3f, max %.3f "
              "(target >= 0.95)\n",
              median(http_tps) / median(engine_tps), median(ratios), min_of(ratios), max_of(ratios));
  // CPU time depends less than tokens/s on how much of the cores other processes took meanwhile (only
  // through the compute pool's spin-waits), so on a shared machine it tells what serving costs more steadily.
  const double engine_us = us_per_token(engine_usage.self_cpu_s, engine_usage.tokens);
  const double serve_us = us_per_token(http_usage.child_cpu_s, http_usage.tokens);
  const std::string of_engine = engine_us > 0 ? std::to_string(serve_us / engine_us).substr(0, 5) : "n/a";
  std::printf("CPU per generated token (all threads, all reps; clock ticks): engine side %.0f us; HTTP side: the "
              "serve child %.0f us (%s of the engine's), the client %.1f us\n",
              engine_us, serve_us, of_engine.c_str(), us_per_token(http_usage.self_cpu_s, http_usage.tokens));
  // The benchmark wants the cores to itself: another process's share of them changes how much of the
  // cores each side gets, which interleaving only evens out on average.
  const long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("other processes used %.0f%% (engine runs) and %.0f%% (HTTP runs) of the %ld cores%s\n",
              100 * engine_usage.others_cpu_s / (engine_usage.wall_s * static_cast<double>(cores)),
              100 * http_usage.others_cpu_s / (http_usage.wall_s * static_cast<double>(cores)), cores,
              engine_usage.others_cpu_s + http_usage.others_cpu_s > 0.05 * (engine_usage.wall_s + http_usage.wall_s)
                  ? ": a busy machine, whose scheduler may decide the ratio more than serving does"
                  : "");
  std::printf("tokens: %s\n", problems.empty() ? ("every request generated " + std::to_string(o.new_tokens) +
                                                  " tokens on both sides, with the same text").c_str()
                                               : "MISMATCH (below)");
  if (o.thread_usage) {
    std::printf("\nCPU time by thread over the engine runs (%.2f s of wall time):\n  this process\n",
                engine_usage.wall_s);
    print_thread_usage(engine_usage.self, engine_usage.wall_s, "    ");
    std::printf("  the serve child (idle)\n");
    print_thread_usage(engine_usage.child, engine_usage.wall_s, "    ");
    std::printf("CPU time by thread over the HTTP runs (%.2f s of wall time):\n  the serve child\n", http_usage.wall_s);
    print_thread_usage(http_usage.child, http_usage.wall_s, "    ");
    std::printf("  this process (the client threads end with each run and are not counted)\n");
    print_thread_usage(http_usage.self, http_usage.wall_s, "    ");
  }
  std::printf("load average %s at the end\n", load_average().c_str());
  std::fflush(stdout);

  for (const std::string& p : problems) std::fprintf(stderr, "loragate: serve-gap: error: %s\n", p.c_str());
  const Status stopped = child.stop();
  if (!problems.empty()) {
    return Status::internal(std::to_string(problems.size()) +
                            " request(s) generated different tokens on the two sides");
  }
  return stopped;
}

}  // namespace loragate::bench
