// The two sides `loragate bench serve-gap` compares on one workload: the
// engine in this process (EngineSide, serve_gap_engine_side.cpp) and
// `loragate serve` over loopback HTTP (HttpSide, serve_gap_http_side.cpp).
// Internal to bench/; run_serve_gap_bench (serve_gap_bench.cpp) drives them.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/serve_gap_bench.h"
#include "client/http_client.h"
#include "engine/engine_loop.h"

namespace loragate::bench::serve_gap_detail {

inline constexpr int kAdapterRank = 16;
inline constexpr const char* kServedName = "serve-gap-base";
inline constexpr double kServeCandidateShare = 0.25;  // ServeConfig's engine.candidate_share default: serve's gate
// How long to wait for a loop's stats to count the step that finished a run (they follow it by microseconds).
inline constexpr auto kSettleLimit = std::chrono::seconds(10);

struct Workload {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> adapters;  // per request; "" = the base alone
  int new_tokens = 0;
  size_t size() const { return prompts.size(); }
};

// The served name of adapter i.
std::string adapter_name(int i);

// The naming and seeds of `bench lora`'s adapters, so that the two benchmarks can share a directory.
std::string adapter_dir(const std::string& root, int i);

// What `loragate serve` runs its base with: ServeConfig's defaults (a default
// EngineOptions), the dtype, and enough adapter slots for every adapter of
// the run to share each step (serve's default of 4 would make both sides
// take turns by adapter). The child's config sets exactly these two keys.
EngineOptions serve_engine_options(const ServeGapOptions& o);

// One run of one side: every request's generated tokens (and text, to compare the sides).
struct SideRun {
  double wall_s = 0;
  int64_t steps = 0;  // engine steps the run took: arrivals spread over more steps cost throughput
  std::vector<int64_t> tokens;
  std::vector<std::string> text;
  int64_t total_tokens() const {
    int64_t n = 0;
    for (int64_t t : tokens) n += t;
    return n;
  }
  double tokens_per_s() const { return static_cast<double>(total_tokens()) / wall_s; }
};

// The engine side: an EngineLoop in this process, as `loragate serve` builds its loop.
class EngineSide {
 public:
  static Result<std::unique_ptr<EngineSide>> load(const ServeGapOptions& o);
  Result<SideRun> run(const Workload& w);

 private:
  explicit EngineSide(std::unique_ptr<EngineLoop> loop) : loop_(std::move(loop)) {}

  // The loop's stats once the step that finished the last request has been counted.
  EngineStats settled_stats() const;

  std::unique_ptr<EngineLoop> loop_;
};

// The HTTP side: `loragate serve` over loopback.
class HttpSide {
 public:
  // One client (one keep-alive connection) per concurrent request, kept across runs.
  // `stream`: SSE answers, one event per token, instead of one JSON body each.
  static Result<std::unique_ptr<HttpSide>> connect(const std::string& url, size_t clients, bool stream);
  Result<SideRun> run(const Workload& w);

 private:
  explicit HttpSide(bool stream) : stream_(stream) {}

  // The value of a per-base /metrics sample of the served base, e.g. loragate_engine_steps_total.
  static Result<double> metric(const std::string& text, const std::string& family);
  // The child's engine steps once it has counted the step that finished the last request.
  Result<int64_t> settled_steps();

  // One streamed completion, put together from its events.
  struct StreamedCompletion;

  // usage.completion_tokens and choices[0].text of a non-streaming completion.
  static Result<std::pair<int64_t, std::string>> read_completion(const std::string& body);

  const bool stream_;
  client::HttpClient metrics_{client::Url{}};  // GET /metrics, on a connection of its own
  std::vector<client::HttpClient> clients_;
};

}  // namespace loragate::bench::serve_gap_detail
