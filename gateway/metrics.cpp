#include "gateway/metrics.h"

#include <cstdio>

namespace loragate {
namespace {

// A label value with Prometheus escaping (backslash, quote, newline).
std::string label(const std::string& key, const std::string& value) {
  std::string out = key + "=\"";
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, const std::string& labels, double v) {
  out += name;
  if (!labels.empty()) out += "{" + labels + "}";
  out += " " + number(v) + "\n";
}

}  // namespace

void Histogram::observe(double seconds) {
  size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  if (i < kBounds.size()) ++counts_[i];
  ++count_;
  sum_ += seconds;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += counts_[i];
    sample(out, name + "_bucket", labels + "," + label("le", number(kBounds[i])), static_cast<double>(cumulative));
  }
  sample(out, name + "_bucket", labels + "," + label("le", "+Inf"), static_cast<double>(count_));
  sample(out, name + "_sum", labels, sum_);
  sample(out, name + "_count", labels, static_cast<double>(count_));
}

Metrics::Metrics(std::function<EngineStats()> engine_stats, const AdapterCache* cache)
    : engine_stats_(std::move(engine_stats)), cache_(cache) {}

void Metrics::on_request_done(const RequestRecord& r) {
  if (r.route.empty() || r.route.rfind("/v1/", 0) != 0 || r.route == "/v1/models") return;  // generation routes only
  std::lock_guard<std::mutex> lock(mu_);
  PerAdapter& a = by_adapter_[r.adapter];
  ++a.requests_by_status[r.status];
  a.prompt_tokens += static_cast<uint64_t>(r.prompt_tokens);
  a.completion_tokens += static_cast<uint64_t>(r.completion_tokens);
  if (r.ttft_ms >= 0) a.ttft.observe(r.ttft_ms / 1e3);
  for (double gap : r.itl_ms) a.itl.observe(gap / 1e3);
  a.e2e.observe(r.e2e_ms / 1e3);
}

uint64_t Metrics::requests_for(const std::string& adapter) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_adapter_.find(adapter);
  uint64_t n = 0;
  if (it != by_adapter_.end()) {
    for (const auto& [status, count] : it->second.requests_by_status) n += count;
  }
  return n;
}

std::string Metrics::render() const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto adapter_label = [](const std::string& name) { return label("adapter", name.empty() ? "base" : name); };
    header(out, "loragate_requests_total", "counter", "Generation requests by adapter and HTTP status.");
    for (const auto& [name, a] : by_adapter_) {
      for (const auto& [status, n] : a.requests_by_status) {
        sample(out, "loragate_requests_total", adapter_label(name) + "," + label("status", std::to_string(status)),
               static_cast<double>(n));
      }
    }
    header(out, "loragate_prompt_tokens_total", "counter", "Prompt tokens by adapter.");
    for (const auto& [name, a] : by_adapter_) sample(out, "loragate_prompt_tokens_total", adapter_label(name), a.prompt_tokens);
    header(out, "loragate_generation_tokens_total", "counter", "Generated tokens by adapter.");
    for (const auto& [name, a] : by_adapter_) {
      sample(out, "loragate_generation_tokens_total", adapter_label(name), a.completion_tokens);
    }
    header(out, "loragate_time_to_first_token_seconds", "histogram", "Arrival to first token, by adapter.");
    for (const auto& [name, a] : by_adapter_) a.ttft.render(out, "loragate_time_to_first_token_seconds", adapter_label(name));
    header(out, "loragate_inter_token_latency_seconds", "histogram", "Gap between consecutive tokens, by adapter.");
    for (const auto& [name, a] : by_adapter_) a.itl.render(out, "loragate_inter_token_latency_seconds", adapter_label(name));
    header(out, "loragate_e2e_request_latency_seconds", "histogram", "Request read to response written, by adapter.");
    for (const auto& [name, a] : by_adapter_) a.e2e.render(out, "loragate_e2e_request_latency_seconds", adapter_label(name));
  }
  if (engine_stats_) {
    const EngineStats s = engine_stats_();
    header(out, "loragate_queue_length", "gauge", "Requests waiting to be scheduled.");
    sample(out, "loragate_queue_length", "", static_cast<double>(s.waiting));
    header(out, "loragate_running_sequences", "gauge", "Sequences in the running batch.");
    sample(out, "loragate_running_sequences", "", static_cast<double>(s.running));
    header(out, "loragate_kv_blocks_used", "gauge", "KV-cache blocks in use.");
    sample(out, "loragate_kv_blocks_used", "", s.kv_blocks_used);
    header(out, "loragate_kv_blocks_total", "gauge", "KV-cache blocks in the pool.");
    sample(out, "loragate_kv_blocks_total", "", s.kv_blocks_total);
    header(out, "loragate_preemptions_total", "counter", "Sequences preempted for KV blocks.");
    sample(out, "loragate_preemptions_total", "", static_cast<double>(s.preemptions));
  }
  if (cache_ != nullptr) {
    const AdapterCacheStats c = cache_->stats();
    header(out, "loragate_adapter_cache_hits_total", "counter", "Adapter acquisitions served from a slot or host memory.");
    sample(out, "loragate_adapter_cache_hits_total", label("tier", "slot"), static_cast<double>(c.slot_hits));
    sample(out, "loragate_adapter_cache_hits_total", label("tier", "host"), static_cast<double>(c.host_hits));
    header(out, "loragate_adapter_cache_misses_total", "counter", "Adapter acquisitions that started a disk load.");
    sample(out, "loragate_adapter_cache_misses_total", "", static_cast<double>(c.misses));
    header(out, "loragate_adapter_loads_total", "counter", "Adapter loads from disk, by result.");
    sample(out, "loragate_adapter_loads_total", label("result", "ok"), static_cast<double>(c.loads));
    sample(out, "loragate_adapter_loads_total", label("result", "error"), static_cast<double>(c.load_failures));
    header(out, "loragate_adapter_load_seconds_total", "counter", "Time spent loading adapters from disk.");
    sample(out, "loragate_adapter_load_seconds_total", "", c.load_ms_total / 1e3);
    header(out, "loragate_adapter_evictions_total", "counter", "Adapters evicted, by tier.");
    sample(out, "loragate_adapter_evictions_total", label("tier", "host"), static_cast<double>(c.host_evictions));
    sample(out, "loragate_adapter_evictions_total", label("tier", "slot"), static_cast<double>(c.slot_evictions));
    header(out, "loragate_adapter_slots_used", "gauge", "Adapter slots holding an adapter.");
    sample(out, "loragate_adapter_slots_used", "", c.slots_used);
    header(out, "loragate_adapter_host_bytes", "gauge", "Host memory held by loaded adapters.");
    sample(out, "loragate_adapter_host_bytes", "", static_cast<double>(c.host_bytes));
  }
  return out;
}

}  // namespace loragate
