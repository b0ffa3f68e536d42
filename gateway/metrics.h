// Metrics: the gateway's Prometheus exposition (GET /metrics).
//
// It observes every finished request (RequestObserver) — counts by adapter
// and status, token counts, histograms of TTFT, inter-token latency and
// end-to-end latency by adapter — and, when rendered, samples the engine's
// queue, running sequences, KV blocks and adapter-cache counters.
// Thread-safe: observed from every network thread, rendered from any.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "adapters/adapter_cache.h"
#include "engine/engine.h"
#include "gateway/request_observer.h"

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
  // `engine_stats` and `cache` are sampled at render time; either may be empty/null.
  Metrics(std::function<EngineStats()> engine_stats, const AdapterCache* cache);

  void on_request_done(const RequestRecord& record) override;
  // The whole exposition in Prometheus text format 0.0.4.
  std::string render() const;
  // Generation requests served with `adapter` so far (any status).
  uint64_t requests_for(const std::string& adapter) const;

 private:
  struct PerAdapter {
    std::map<int, uint64_t> requests_by_status;
    uint64_t prompt_tokens = 0, completion_tokens = 0;
    Histogram ttft, itl, e2e;
  };

  std::function<EngineStats()> engine_stats_;
  const AdapterCache* cache_;
  mutable std::mutex mu_;
  std::map<std::string, PerAdapter> by_adapter_;  // guarded by mu_; "" = the base alone
};

}  // namespace loragate
