// Metrics: the gateway's Prometheus exposition (GET /metrics).
//
// It observes every finished request (RequestObserver) — counts by base
// generation, adapter and status, token counts, histograms of TTFT,
// inter-token latency and end-to-end latency by base and adapter — and, when
// rendered, samples every loaded base: its state (loragate_base_info), queue,
// running sequences, KV blocks, prefix-cache and adapter-cache counters, the
// swap counters, and for the serving base the model-server metrics the Gateway
// API inference extension's endpoint picker reads (vllm:num_requests_waiting,
// vllm:num_requests_running, vllm:kv_cache_usage_perc, vllm:lora_requests_info)
// and vLLM's prefix-cache counters (vllm:prefix_cache_queries, _hits),
// and for every loaded base the adapters resident in it
// (vllm:lora_adapter_loaded) and its slot count (vllm:lora_max_adapters).
// Thread-safe: observed from every network thread, rendered from any.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "bases/base_set.h"
#include "gateway/metrics/request_observer.h"

namespace loragate {

// Cumulative histogram with fixed bucket bounds (seconds).
class Histogram {
 public:
  static constexpr std::array<double, 14> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                     0.25,  0.5,    1.0,   2.5,  5.0,   10.0, 30.0};
  void observe(double seconds);
  // Appends the _bucket/_sum/_count lines of `name` with `labels` ("adapter=\"x\"").
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::array<uint64_t, kBounds.size()> counts_{};  // per bucket (not cumulative)
  uint64_t count_ = 0;
  double sum_ = 0;
};

class Metrics final : public RequestObserver {
 public:
  // `bases` is sampled at render time; not owned; may be null.
  explicit Metrics(const BaseSet* bases);

  void on_request_done(const RequestRecord& record) override;
  // The whole exposition in Prometheus text format 0.0.4.
  std::string render() const;
  // Generation requests served with `adapter` on `base` so far (any status).
  uint64_t requests_for(const std::string& base, const std::string& adapter) const;
  // Streams cut off because their client read too slowly (loragate_stream_overflow_total).
  uint64_t stream_overflows() const;

 private:
  struct PerAdapter {
    std::map<int, uint64_t> requests_by_status;
    uint64_t prompt_tokens = 0, completion_tokens = 0;
    Histogram ttft, itl, e2e;
  };

  void render_bases(std::string& out) const;

  const BaseSet* bases_;
  mutable std::mutex mu_;
  // guarded by mu_; keyed by (base, adapter), adapter "" = the base alone
  std::map<std::pair<std::string, std::string>, PerAdapter> by_adapter_;
  uint64_t stream_overflows_ = 0;  // guarded by mu_
};

}  // namespace loragate
