// The summary of `loragate bench serve` (bench/serve_bench.h): the
// statistics of what the client saw, and the vLLM-style text block.
#include "bench/serve_bench.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "bench/bench_util.h"

namespace loragate::bench {

// --- statistics --------------------------------------------------------------

double RequestOutcome::tpot_s() const {
  if (output_tokens < 2) return 0.0;
  return (e2e_s - ttft_s) / static_cast<double>(output_tokens - 1);
}

LatencyStats latency_stats_ms(const std::vector<double>& seconds) {
  LatencyStats s;
  if (seconds.empty()) return s;
  std::vector<double> ms(seconds.size());
  std::transform(seconds.begin(), seconds.end(), ms.begin(), [](double x) { return x * 1000.0; });
  s.mean = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  s.median = median(ms);
  s.p99 = percentile(std::move(ms), 99.0);
  return s;
}

ServeBenchReport summarize_serve(const std::vector<RequestOutcome>& outcomes, double duration_s,
                                 const ServeBenchOptions& options) {
  ServeBenchReport r;
  r.duration_s = duration_s;
  r.has_slo = options.slo_ttft_ms > 0 || options.slo_tpot_ms > 0;
  std::vector<double> ttft, tpot, itl, e2e, queue, ttft_hits, ttft_misses;
  for (const RequestOutcome& o : outcomes) {
    ++r.requests_per_model[o.model];
    if (o.model == options.model) ++r.base_requests;
    queue.push_back(o.queue_s);
    if (!o.ok) {
      ++r.failed;
      ++r.failures_by_status[o.status];
      if (r.first_error.empty()) r.first_error = o.error;
      continue;
    }
    ++r.completed;
    r.input_tokens += o.prompt_tokens;
    r.output_tokens += o.output_tokens;
    ttft.push_back(o.ttft_s);
    r.cached_tokens += o.cached_tokens;
    (o.cached_tokens > 0 ? ttft_hits : ttft_misses).push_back(o.ttft_s);
    if (o.output_tokens > 1) tpot.push_back(o.tpot_s());
    itl.insert(itl.end(), o.itl_s.begin(), o.itl_s.end());
    e2e.push_back(o.e2e_s);
    const bool ttft_ok = options.slo_ttft_ms <= 0 || o.ttft_s * 1000.0 <= options.slo_ttft_ms;
    const bool tpot_ok = options.slo_tpot_ms <= 0 || o.tpot_s() * 1000.0 <= options.slo_tpot_ms;
    if (ttft_ok && tpot_ok) ++r.good;
  }
  if (duration_s > 0) {
    r.request_throughput = r.completed / duration_s;
    r.output_throughput = static_cast<double>(r.output_tokens) / duration_s;
    r.total_token_throughput = static_cast<double>(r.input_tokens + r.output_tokens) / duration_s;
    r.goodput = r.good / duration_s;
  }
  r.hit_requests = static_cast<int>(ttft_hits.size());
  r.miss_requests = static_cast<int>(ttft_misses.size());
  if (r.input_tokens > 0) r.hit_rate = static_cast<double>(r.cached_tokens) / static_cast<double>(r.input_tokens);
  r.ttft = latency_stats_ms(ttft);
  r.ttft_hits = latency_stats_ms(ttft_hits);
  r.ttft_misses = latency_stats_ms(ttft_misses);
  r.tpot = latency_stats_ms(tpot);
  r.itl = latency_stats_ms(itl);
  r.e2e = latency_stats_ms(e2e);
  r.queue = latency_stats_ms(queue);
  return r;
}

namespace {

std::string report_row(const std::string& label, const std::string& value) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%-40s %s\n", label.c_str(), value.c_str());
  return buf;
}

std::string report_num(double v, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string report_banner(const std::string& title, char fill) {
  const size_t width = 50;
  if (title.empty()) return std::string(width, fill) + "\n";
  const size_t left = title.size() + 2 >= width ? 0 : (width - title.size() - 2) / 2;
  const size_t right = title.size() + 2 >= width ? 0 : width - title.size() - 2 - left;
  return std::string(left, fill) + " " + title + " " + std::string(right, fill) + "\n";
}

std::string report_latency_block(const std::string& title, const std::string& name, const LatencyStats& s) {
  std::string out = report_banner(title, '-');
  out += report_row("Mean " + name + " (ms):", report_num(s.mean));
  out += report_row("Median " + name + " (ms):", report_num(s.median));
  out += report_row("P99 " + name + " (ms):", report_num(s.p99));
  return out;
}

}  // namespace

std::string format_serve_report(const ServeBenchReport& r, const ServeBenchOptions& o) {
  std::string out = report_banner("Serving Benchmark Result", '=');
  out += report_row("Successful requests:", std::to_string(r.completed));
  out += report_row("Failed requests:", std::to_string(r.failed));
  for (const auto& [status, count] : r.failures_by_status) {
    out += report_row(status == 0 ? "  no HTTP error status (transport/stream):" : "  HTTP " + std::to_string(status) + ":",
               std::to_string(count));
  }
  out += report_row("Benchmark duration (s):", report_num(r.duration_s));
  out += report_row("Total input tokens:", std::to_string(r.input_tokens));
  out += report_row("Total generated tokens:", std::to_string(r.output_tokens));
  out += report_row("Request throughput (req/s):", report_num(r.request_throughput));
  out += report_row("Output token throughput (tok/s):", report_num(r.output_throughput));
  out += report_row("Total Token throughput (tok/s):", report_num(r.total_token_throughput));
  if (r.has_slo) {
    std::string slo;
    if (o.slo_ttft_ms > 0) slo += "TTFT<=" + report_num(o.slo_ttft_ms, 0) + "ms";
    if (o.slo_tpot_ms > 0) slo += std::string(slo.empty() ? "" : ", ") + "TPOT<=" + report_num(o.slo_tpot_ms, 0) + "ms";
    out += report_row("SLO:", slo);
    out += report_row("Requests within SLO:", std::to_string(r.good));
    out += report_row("Request goodput (req/s):", report_num(r.goodput));
  }
  int adapters_used = 0;
  for (const auto& [model, count] : r.requests_per_model) adapters_used += model == o.model ? 0 : 1;
  out += report_row("Requests to the base model:", std::to_string(r.base_requests));
  out += report_row("Distinct adapters used:", std::to_string(adapters_used));
  out += report_row("Mean client queueing (ms):", report_num(r.queue.mean));
  out += report_latency_block("Time to First Token", "TTFT", r.ttft);
  out += report_banner("Prefix Cache", '-');
  out += report_row("Cached prompt tokens:", std::to_string(r.cached_tokens));
  out += report_row("Hit rate (cached / prompt tokens) (%):", report_num(100.0 * r.hit_rate));
  out += report_row("Requests with a hit (cached > 0):", std::to_string(r.hit_requests));
  out += report_row("Requests without:", std::to_string(r.miss_requests));
  out += report_row("Median TTFT, hits (ms):", report_num(r.ttft_hits.median));
  out += report_row("P99 TTFT, hits (ms):", report_num(r.ttft_hits.p99));
  out += report_row("Median TTFT, misses (ms):", report_num(r.ttft_misses.median));
  out += report_row("P99 TTFT, misses (ms):", report_num(r.ttft_misses.p99));
  out += report_latency_block("Time per Output Token (excl. 1st token)", "TPOT", r.tpot);
  out += report_latency_block("Inter-token Latency", "ITL", r.itl);
  out += report_latency_block("End-to-end Latency", "E2EL", r.e2e);
  out += report_banner("", '=');
  if (!r.first_error.empty()) out += "first error: " + r.first_error + "\n";
  return out;
}

}  // namespace loragate::bench
