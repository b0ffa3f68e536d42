// `loragate bench serve`: a load generator for a running server, in the
// manner of vLLM's benchmark_serving. Requests arrive as a Poisson process,
// each picks the base model or one of K adapters with Zipf skew, streams
// /v1/completions, and the client measures TTFT, TPOT, every inter-token gap
// and end-to-end latency; the summary adds throughput and SLO goodput.
//
// For a prefix cache (issue 23): every prompt may start with one shared
// system prompt (shared_prefix_len), a request may be a conversation of
// several turns, each prompt extending the last (turns), and every request
// may carry a cache_salt of its own (a workload with no hits). The client
// reads usage.prompt_tokens_details.cached_tokens from the stream's usage
// chunk and splits TTFT between requests that hit the cache and those that
// did not.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/status.h"

namespace loragate::bench {

struct ServeBenchOptions {
  std::string url = "http://127.0.0.1:8000";
  double rate = std::numeric_limits<double>::infinity();  // requests/s; inf: all at once
  int requests = 100;         // conversations with turns > 1 (each sends `turns` requests)
  int adapters = -1;         // K; -1: every adapter named or served; 0: the base model only
  double zipf_s = 1.0;       // adapter popularity ∝ 1 / rank^s (0: uniform)
  double base_fraction = 0;  // share of requests sent to the base model instead of an adapter
  int prompt_len = 128;      // words (or token ids with token_ids)
  int max_tokens = 128;
  int concurrency = 64;      // client threads = most requests in flight
  double slo_ttft_ms = 0;    // 0: no TTFT objective
  double slo_tpot_ms = 0;    // 0: no TPOT objective
  uint64_t seed = 0;
  std::string model;         // base model id; "": the one GET /v1/models lists without a parent
  std::string model_prefix;  // prepended to adapter names in the request's "model"
  std::vector<std::string> adapter_names;  // instead of the adapters GET /v1/models lists
  bool token_ids = false;    // send the prompt as token ids (models without a tokenizer)
  int vocab = 256;           // token ids are drawn from [3, vocab)
  double temperature = 0.0;
  double timeout_s = 600;    // the longest silence of one request's stream
  std::string result_json;   // also write the summary (and per-request figures) here
  int shared_prefix_len = 0;  // words (or ids) of one system prompt in front of every prompt; 0: none
  int turns = 1;              // requests per conversation; turn k's prompt extends turn k-1's with its answer
  bool cache_salt_per_request = false;  // a unique cache_salt on every request: nothing can hit
};

// Ranks 0..n-1 with P(k) ∝ 1 / (k + 1)^s.
class ZipfSampler {
 public:
  ZipfSampler(int n, double s);
  int size() const { return static_cast<int>(cdf_.size()); }
  double probability(int k) const;
  int sample(std::mt19937_64& rng) const;

 private:
  std::vector<double> cdf_;
};

// Arrival times (seconds from the start, non-decreasing) of `n` requests in a
// Poisson process of `rate`/s; all zero when rate is infinite.
std::vector<double> poisson_arrivals(int n, double rate, uint64_t seed);

// One request as the client saw it.
struct RequestOutcome {
  std::string model;
  int conversation = 0;    // with turns: which conversation, and which of its turns
  int turn = 0;
  bool ok = false;
  int status = 0;          // HTTP status; 0 when no response came
  std::string error;
  double send_s = 0;       // when it was sent, seconds from the start
  double queue_s = 0;      // how long it waited for a free client thread
  double ttft_s = 0;       // first token
  double e2e_s = 0;        // send to the end of the stream
  std::vector<double> itl_s;  // gaps between successive token events
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  int64_t cached_tokens = 0;  // usage.prompt_tokens_details.cached_tokens (0 when absent)

  // (e2e − TTFT) / (tokens − 1); 0 with fewer than two tokens.
  double tpot_s() const;
};

// Milliseconds.
struct LatencyStats {
  double mean = 0, median = 0, p99 = 0;
};
LatencyStats latency_stats_ms(const std::vector<double>& seconds);

struct ServeBenchReport {
  double duration_s = 0;
  int completed = 0;
  int failed = 0;
  std::map<int, int> failures_by_status;  // 0: no HTTP response (refused, timed out, broken stream)
  std::string first_error;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double request_throughput = 0;  // completed / duration
  double output_throughput = 0;   // tokens/s
  double total_token_throughput = 0;
  LatencyStats ttft, tpot, itl, e2e, queue;
  bool has_slo = false;
  int good = 0;          // completed within both objectives
  double goodput = 0;    // good / duration
  std::map<std::string, int> requests_per_model;
  int base_requests = 0;
  // The prefix cache, over completed requests: a hit is a request with cached_tokens > 0.
  int64_t cached_tokens = 0;
  double hit_rate = 0;  // cached_tokens / input_tokens
  int hit_requests = 0, miss_requests = 0;
  LatencyStats ttft_hits, ttft_misses;
};

ServeBenchReport summarize_serve(const std::vector<RequestOutcome>& outcomes, double duration_s,
                                 const ServeBenchOptions& options);
// The vLLM-style summary block.
std::string format_serve_report(const ServeBenchReport& report, const ServeBenchOptions& options);

// Runs the benchmark; progress and the summary go to `out`.
Result<ServeBenchReport> run_serve_bench(const ServeBenchOptions& options, std::ostream& out);

}  // namespace loragate::bench
