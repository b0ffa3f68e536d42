#include "gateway/metrics/metrics.h"

#include <chrono>
#include <cstdio>

#include "adapters/adapter_catalog.h"

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

Metrics::Metrics(const BaseSet* bases) : bases_(bases) {}

void Metrics::on_request_done(const RequestRecord& r) {
  if (r.stream_overflow) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stream_overflows_;
  }
  // Generation routes only: not /v1/models, nor vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter.
  if (r.route != "/v1/completions" && r.route != "/v1/chat/completions") return;
  std::lock_guard<std::mutex> lock(mu_);
  PerAdapter& a = by_adapter_[{r.base, r.adapter}];
  ++a.requests_by_status[r.status];
  a.prompt_tokens += static_cast<uint64_t>(r.prompt_tokens);
  a.completion_tokens += static_cast<uint64_t>(r.completion_tokens);
  if (r.ttft_ms >= 0) a.ttft.observe(r.ttft_ms / 1e3);
  for (double gap : r.itl_ms) a.itl.observe(gap / 1e3);
  a.e2e.observe(r.e2e_ms / 1e3);
}

uint64_t Metrics::requests_for(const std::string& base, const std::string& adapter) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_adapter_.find({base, adapter});
  uint64_t n = 0;
  if (it != by_adapter_.end()) {
    for (const auto& [status, count] : it->second.requests_by_status) n += count;
  }
  return n;
}

uint64_t Metrics::stream_overflows() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stream_overflows_;
}

std::string Metrics::render() const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto labels = [](const std::pair<std::string, std::string>& key) {
      return label("base", key.first) + "," + label("adapter", key.second.empty() ? "base" : key.second);
    };
    header(out, "loragate_requests_total", "counter", "Generation requests by base, adapter and HTTP status.");
    for (const auto& [key, a] : by_adapter_) {
      for (const auto& [status, n] : a.requests_by_status) {
        sample(out, "loragate_requests_total", labels(key) + "," + label("status", std::to_string(status)),
               static_cast<double>(n));
      }
    }
    header(out, "loragate_prompt_tokens_total", "counter", "Prompt tokens by base and adapter.");
    for (const auto& [key, a] : by_adapter_) sample(out, "loragate_prompt_tokens_total", labels(key), a.prompt_tokens);
    header(out, "loragate_generation_tokens_total", "counter", "Generated tokens by base and adapter.");
    for (const auto& [key, a] : by_adapter_) {
      sample(out, "loragate_generation_tokens_total", labels(key), a.completion_tokens);
    }
    header(out, "loragate_time_to_first_token_seconds", "histogram", "Arrival to first token, by base and adapter.");
    for (const auto& [key, a] : by_adapter_) a.ttft.render(out, "loragate_time_to_first_token_seconds", labels(key));
    header(out, "loragate_inter_token_latency_seconds", "histogram", "Gap between consecutive tokens.");
    for (const auto& [key, a] : by_adapter_) a.itl.render(out, "loragate_inter_token_latency_seconds", labels(key));
    header(out, "loragate_e2e_request_latency_seconds", "histogram", "Request read to response written.");
    for (const auto& [key, a] : by_adapter_) a.e2e.render(out, "loragate_e2e_request_latency_seconds", labels(key));
    header(out, "loragate_stream_overflow_total", "counter",
           "Streams cut off because the client read slower than tokens came (server.max_stream_buffer_bytes).");
    sample(out, "loragate_stream_overflow_total", "", static_cast<double>(stream_overflows_));
  }
  if (bases_ != nullptr) render_bases(out);
  return out;
}

void Metrics::render_bases(std::string& out) const {
  const std::vector<BaseStatus> statuses = bases_->list();
  header(out, "loragate_base_info", "gauge", "1 for every base generation loaded, with its state.");
  for (const BaseStatus& b : statuses) {
    sample(out, "loragate_base_info",
           label("name", b.name) + "," + label("state", base_state_name(b.state)) + "," +
               label("fingerprint", b.fingerprint),
           1);
  }
  header(out, "loragate_base_swaps_total", "counter", "Base swaps since start, by kind.");
  for (const char* kind : {"promote", "rollback"}) {
    sample(out, "loragate_base_swaps_total", label("kind", kind), static_cast<double>(bases_->swaps_total(kind)));
  }

  struct Loaded {
    std::string name;
    std::shared_ptr<ServingBase> base;
  };
  std::vector<Loaded> loaded;
  for (const BaseStatus& b : statuses) {
    if (auto found = bases_->find(b.name); found.is_ok()) loaded.push_back({b.name, std::move(found).value()});
  }
  // Every per-base family, filled base by base, then written family by family.
  struct Family {
    const char* name;
    const char* type;
    const char* help;
    std::vector<std::pair<std::string, double>> samples;  // (labels, value)
  };
  Family queue{"loragate_queue_length", "gauge", "Requests waiting to be scheduled.", {}};
  Family running{"loragate_running_sequences", "gauge", "Sequences in the running batch.", {}};
  Family kv_used{"loragate_kv_blocks_used", "gauge", "KV-cache blocks in use.", {}};
  Family kv_total{"loragate_kv_blocks_total", "gauge", "KV-cache blocks in the pool.", {}};
  Family preempted{"loragate_preemptions_total", "counter", "Sequences preempted for KV blocks.", {}};
  Family steps{"loragate_engine_steps_total", "counter", "Engine steps (one batch scheduled and run each).", {}};
  Family hits{"loragate_adapter_cache_hits_total", "counter", "Adapter acquisitions served from a slot or host memory.", {}};
  Family misses{"loragate_adapter_cache_misses_total", "counter", "Adapter acquisitions that started a disk load.", {}};
  Family loads{"loragate_adapter_loads_total", "counter", "Adapter loads from disk, by result.", {}};
  Family load_s{"loragate_adapter_load_seconds_total", "counter", "Time spent loading adapters from disk.", {}};
  Family evictions{"loragate_adapter_evictions_total", "counter", "Adapters evicted, by tier.", {}};
  Family slots{"loragate_adapter_slots_used", "gauge", "Adapter slots holding an adapter.", {}};
  Family pinned{"loragate_adapter_slots_pinned", "gauge", "Adapter slots pinned by running sequences.", {}};
  Family host{"loragate_adapter_host_bytes", "gauge", "Host memory held by loaded adapters.", {}};
  Family pc_queries{"loragate_prefix_cache_queries_total", "counter",
                    "Prompt tokens looked up in the prefix cache (at each admission).", {}};
  Family pc_hits{"loragate_prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.", {}};
  Family pc_blocks{"loragate_prefix_cache_blocks", "gauge",
                   "KV blocks holding a cached prefix (in use or free for reuse).", {}};
  for (const Loaded& l : loaded) {
    const std::string b = label("base", l.name);
    auto with = [&](const char* key, const char* value) { return b + "," + label(key, value); };
    const EngineStats e = l.base->loop().stats();
    queue.samples.emplace_back(b, static_cast<double>(e.waiting));
    running.samples.emplace_back(b, static_cast<double>(e.running));
    kv_used.samples.emplace_back(b, e.kv_blocks_used);
    kv_total.samples.emplace_back(b, e.kv_blocks_total);
    preempted.samples.emplace_back(b, static_cast<double>(e.preemptions));
    steps.samples.emplace_back(b, static_cast<double>(e.steps));
    const AdapterCacheStats c = l.base->adapters()->stats();
    hits.samples.emplace_back(with("tier", "slot"), static_cast<double>(c.slot_hits));
    hits.samples.emplace_back(with("tier", "host"), static_cast<double>(c.host_hits));
    misses.samples.emplace_back(b, static_cast<double>(c.misses));
    loads.samples.emplace_back(with("result", "ok"), static_cast<double>(c.loads));
    loads.samples.emplace_back(with("result", "error"), static_cast<double>(c.load_failures));
    load_s.samples.emplace_back(b, c.load_ms_total / 1e3);
    evictions.samples.emplace_back(with("tier", "host"), static_cast<double>(c.host_evictions));
    evictions.samples.emplace_back(with("tier", "slot"), static_cast<double>(c.slot_evictions));
    slots.samples.emplace_back(b, c.slots_used);
    pinned.samples.emplace_back(b, c.slots_pinned);
    host.samples.emplace_back(b, static_cast<double>(c.host_bytes));
    pc_queries.samples.emplace_back(b, static_cast<double>(e.prefix_cache_queries));
    pc_hits.samples.emplace_back(b, static_cast<double>(e.prefix_cache_hits));
    pc_blocks.samples.emplace_back(b, e.prefix_cache_blocks);
  }
  // Residency by adapter, as vLLM's newer gauges name it: an adapter is
  // loaded while its weights are in host memory or a slot (not while on disk,
  // loading or failed). With consistent hashing in front of a fleet this is
  // what shows an adapter staying on its replica.
  Family resident{"vllm:lora_adapter_loaded", "gauge", "1 for every adapter loaded (host memory or a slot), by base.", {}};
  Family max_adapters{"vllm:lora_max_adapters", "gauge", "Adapter slots usable in one step (engine.max_loras), by base.", {}};
  for (const Loaded& l : loaded) {
    if (l.base->adapters() == nullptr) continue;  // engine.max_loras 0: no adapters
    for (const AdapterInfo& a : l.base->adapters()->list()) {
      if (a.tier != AdapterTier::kHost && a.tier != AdapterTier::kSlot) continue;
      resident.samples.emplace_back(label("adapter_name", a.name) + "," + label("base", l.name), 1);
    }
    max_adapters.samples.emplace_back(label("base", l.name), l.base->loop().options().max_loras);
  }
  for (const Family* f : {&queue, &running, &kv_used, &kv_total, &preempted, &steps, &hits, &misses, &loads,
                          &load_s, &evictions, &slots, &pinned, &host, &pc_queries, &pc_hits, &pc_blocks, &resident,
                          &max_adapters}) {
    header(out, f->name, f->type, f->help);
    for (const auto& [labels, value] : f->samples) sample(out, f->name, labels, value);
  }

  // The serving base as vLLM names it, for the inference extension's endpoint picker.
  const std::shared_ptr<ServingBase> serving = bases_->serving();
  if (serving == nullptr) return;
  const EngineStats s = serving->loop().stats();
  header(out, "vllm:num_requests_waiting", "gauge", "Requests waiting to be scheduled (serving base).");
  sample(out, "vllm:num_requests_waiting", "", static_cast<double>(s.waiting));
  header(out, "vllm:num_requests_running", "gauge", "Requests running (serving base).");
  sample(out, "vllm:num_requests_running", "", static_cast<double>(s.running));
  header(out, "vllm:kv_cache_usage_perc", "gauge", "Fraction of KV-cache blocks in use, 0..1 (serving base).");
  sample(out, "vllm:kv_cache_usage_perc", "",
         s.kv_blocks_total > 0 ? static_cast<double>(s.kv_blocks_used) / s.kv_blocks_total : 0.0);
  // vLLM's prefix-cache counters, in tokens: hits / queries is the hit rate a dashboard plots.
  header(out, "vllm:prefix_cache_queries", "counter", "Prompt tokens looked up in the prefix cache (serving base).");
  sample(out, "vllm:prefix_cache_queries", "", static_cast<double>(s.prefix_cache_queries));
  header(out, "vllm:prefix_cache_hits", "counter", "Prompt tokens found in the prefix cache (serving base).");
  sample(out, "vllm:prefix_cache_hits", "", static_cast<double>(s.prefix_cache_hits));
  auto names = [](const std::vector<std::string>& v) {
    std::string joined;
    for (const std::string& n : v) joined += (joined.empty() ? "" : ",") + n;
    return joined;
  };
  const AdapterCatalog& cache = *serving->adapters();
  header(out, "vllm:lora_requests_info", "gauge", "Running and waiting LoRA adapters; the value is the sample time.");
  sample(out, "vllm:lora_requests_info",
         label("max_lora", std::to_string(serving->loop().options().max_loras)) + "," +
             label("running_lora_adapters", names(cache.running())) + "," +
             label("waiting_lora_adapters", names(cache.waiting())),
         std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
}

}  // namespace loragate
