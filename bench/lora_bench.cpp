#include "bench/lora_bench.h"

#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "adapters/lora_slots.h"
#include "adapters/synth_adapter.h"
#include "bench/bench_util.h"
#include "bench/roofline.h"
#include "kernels/cpu/isa.h"
#include "engine/engine_loop.h"

namespace loragate::bench {
namespace {

std::string adapter_dir(const std::string& root, int rank, const char* kind, int i) {
  return root + "/r" + std::to_string(rank) + "-" + kind + "-" + std::to_string(i);
}

// Writes the synthetic adapters that are not there yet.
Status ensure_adapters(const std::string& root, const ModelConfig& base, int n, int rank,
                       const std::vector<LoraModule>& targets, const char* kind) {
  int written = 0;
  for (int i = 0; i < n; ++i) {
    const std::string dir = adapter_dir(root, rank, kind, i);
    if (std::filesystem::exists(dir + "/adapter_model.safetensors")) continue;
    SynthAdapterOptions o;
    o.rank = rank;
    o.lora_alpha = 2.0 * rank;
    o.targets = targets;
    o.seed = static_cast<uint64_t>(1000 + i);
    LG_RETURN_IF_ERROR(write_synth_adapter(dir, base, o));
    ++written;
  }
  if (written > 0) std::printf("wrote %d synthetic rank-%d adapters under %s\n", written, rank, root.c_str());
  return Status::ok();
}


// Decode tokens/s of `requests` (prefilled together in the first step).
Result<double> decode_tps(Engine& engine, std::vector<GenerationRequest> requests) {
  for (GenerationRequest& r : requests) LG_RETURN_IF_ERROR(engine.add_request(std::move(r)).status());
  // The budget holds every prompt, so the step that admits the last waiting
  // request also prefills it; adapter loads may take a few steps first.
  do {
    LG_RETURN_IF_ERROR(engine.step());
    if (!engine.made_progress()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  } while (engine.stats().waiting > 0);
  const int64_t before = engine.stats().generated_tokens;
  const BenchClock::time_point start = BenchClock::now();
  while (engine.has_unfinished()) LG_RETURN_IF_ERROR(engine.step());
  const double s = seconds_since(start);
  for (const GenerationResult& r : engine.take_finished()) {
    if (r.finish_reason == FinishReason::kError) return Status::internal("benchmark request failed: " + r.error);
  }
  return static_cast<double>(engine.stats().generated_tokens - before) / s;
}

std::vector<GenerationRequest> requests_for(const LoraBenchOptions& o, int64_t vocab,
                                            const std::function<std::string(int)>& adapter_of) {
  std::vector<GenerationRequest> out;
  for (int i = 0; i < o.requests; ++i) {
    GenerationRequest r = greedy_request(o.prompt_len, o.new_tokens, vocab, i);
    r.adapter = adapter_of(i);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

Status run_lora_bench(const LoraBenchOptions& o) {
  LG_ASSIGN_OR_RETURN(ModelConfig base, ModelConfig::load(o.model_dir));
  const std::vector<LoraModule> all(kAllLoraModules.begin(), kAllLoraModules.end());
  LG_RETURN_IF_ERROR(ensure_adapters(o.adapters_dir, base, o.num_adapters, o.rank, all, "all"));

  EngineOptions eo;
  eo.weight_dtype = parse_weight_type(o.dtype).value();
  eo.max_num_seqs = o.requests;
  eo.max_num_batched_tokens = static_cast<int64_t>(o.requests) * o.prompt_len;
  eo.kv_num_blocks = o.requests * ((o.prompt_len + o.new_tokens) / 16 + 2);
  eo.max_loras = o.requests;
  eo.max_lora_rank = o.rank;
  eo.prefix_caching = false;  // every rep sends the same prompts: hits would skip the prefills it times
  LG_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::load(o.model_dir, eo));
  std::vector<std::string> names;
  for (int i = 0; i < o.num_adapters; ++i) {
    names.push_back(std::string("r").append(std::to_string(o.rank)).append("-").append(std::to_string(i)));
    LG_RETURN_IF_ERROR(engine->adapters()->add(names.back(), adapter_dir(o.adapters_dir, o.rank, "all", i)));
  }
  const int64_t vocab = base.vocab_size;
  std::printf("loragate multi-LoRA benchmark: %s weights, %d concurrent requests (prompt %d, %d new tokens), "
              "%d rank-%d adapters on all 7 projections, %d reps, matmul %s\n",
              o.dtype.c_str(), o.requests, o.prompt_len, o.new_tokens, o.num_adapters, o.rank, o.reps,
              cpu::isa_name(cpu::best_isa()));

  // Load times: disk -> host (parse + validate + convert), host -> slot (copy into the preallocated buffers).
  std::vector<double> disk_ms, slot_ms;
  LoraSlots scratch_slots(base, 1, o.rank);
  for (int i = 0; i < std::min(o.num_adapters, 16); ++i) {
    const BenchClock::time_point t0 = BenchClock::now();
    LG_ASSIGN_OR_RETURN(auto adapter, LoraAdapter::load(adapter_dir(o.adapters_dir, o.rank, "all", i), base, o.rank));
    disk_ms.push_back(seconds_since(t0) * 1e3);
    const BenchClock::time_point t1 = BenchClock::now();
    scratch_slots.set(0, *adapter);
    slot_ms.push_back(seconds_since(t1) * 1e3);
  }

  const char* labels[] = {"(a) no adapter", "(b) 1 shared adapter", "(c) distinct adapters"};
  std::vector<std::function<std::string(int)>> mixes = {
      [](int) { return std::string(); },
      [&](int) { return names[0]; },
      [&](int i) { return names[static_cast<size_t>(i) % names.size()]; },
  };
  // Warm-up: every adapter of (c) reaches the host tier and a slot once.
  LG_RETURN_IF_ERROR(decode_tps(*engine, requests_for(o, vocab, mixes[2])).status());
  std::vector<std::vector<double>> tps(3);
  std::vector<double> triad;
  for (int rep = 0; rep < o.reps; ++rep) {
    triad.push_back(measure_triad_gbps(0, 3));
    for (size_t m = 0; m < mixes.size(); ++m) {  // interleaved within each rep
      LG_ASSIGN_OR_RETURN(double v, decode_tps(*engine, requests_for(o, vocab, mixes[m])));
      tps[m].push_back(v);
    }
  }

  // (d) PEFT-style: one merged model per adapter, that adapter's requests as their own batch.
  std::vector<double> merge_s;
  double merged_tokens = 0, merged_decode_s = 0;
  const int per_adapter = std::max(1, o.requests / std::min(o.requests, o.num_adapters));
  for (int i = 0; i < o.merged_sample; ++i) {
    const BenchClock::time_point t0 = BenchClock::now();
    LG_ASSIGN_OR_RETURN(auto adapter, LoraAdapter::load(adapter_dir(o.adapters_dir, o.rank, "all", i), base, o.rank));
    EngineOptions mo = eo;
    mo.max_loras = 0;
    LG_ASSIGN_OR_RETURN(std::unique_ptr<Engine> merged, Engine::load(o.model_dir, mo, adapter.get()));
    merge_s.push_back(seconds_since(t0));
    std::vector<GenerationRequest> own;
    for (int k = 0; k < per_adapter; ++k) own.push_back(greedy_request(o.prompt_len, o.new_tokens, vocab, i * 31 + k));
    LG_ASSIGN_OR_RETURN(double v, decode_tps(*merged, std::move(own)));
    merged_tokens += per_adapter * (o.new_tokens - 1);
    merged_decode_s += per_adapter * (o.new_tokens - 1) / v;
  }
  const double merged_tps = merged_tokens / merged_decode_s;
  const double merge_each = median(merge_s);
  // Serving all requests this way: each adapter's batch in turn, with a merge before each.
  const double batches = std::ceil(static_cast<double>(o.requests) / per_adapter);
  const double tokens_all = static_cast<double>(o.requests) * (o.new_tokens - 1);
  const double with_swaps_tps = tokens_all / (tokens_all / merged_tps + batches * merge_each);

  std::printf("\nmemory bandwidth (triad, median of %d, measured between reps): %.1f GB/s\n", o.reps, median(triad));
  std::printf("adapter load: disk -> host %.2f ms (median of %zu), host -> slot %.2f ms; %.1f MiB per adapter\n",
              median(disk_ms), disk_ms.size(), median(slot_ms),
              static_cast<double>(engine->adapters()->list().front().bytes) / 1048576.0);
  std::printf("\n%-34s %14s %12s\n", "decode, all requests together", "tokens/s", "vs (a)");
  const double a = median(tps[0]);
  for (size_t m = 0; m < mixes.size(); ++m) {
    std::printf("%-34s %14.1f %11.1f%%\n", labels[m], median(tps[m]), 100.0 * median(tps[m]) / a);
  }
  std::printf("%-34s %14.1f %11.1f%%   (%d adapters sampled, %d request(s) per batch)\n",
              "(d) merged, one adapter at a time", merged_tps, 100.0 * merged_tps / a, o.merged_sample, per_adapter);
  std::printf("%-34s %14.1f %11.1f%%   (+ %.2f s merge and reload per adapter)\n", "(d) incl. merges",
              with_swaps_tps, 100.0 * with_swaps_tps / a, merge_each);
  std::printf("\nratios: (c)/(a) = %.2f (target >= 0.80), (c)/(d) = %.1fx (target >= 3x), (c)/(d incl. merges) = %.1fx\n",
              median(tps[2]) / a, median(tps[2]) / merged_tps, median(tps[2]) / with_swaps_tps);
  return Status::ok();
}

namespace {

// Collects one request's end for the Zipf run.
class TimingSink : public RequestSink {
 public:
  void on_token(int64_t, int32_t, std::string_view) override {}
  void on_finish(const GenerationResult& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    result_ = r;
    done_ = true;
    cv_.notify_all();
  }
  GenerationResult wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return result_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  GenerationResult result_;
};

}  // namespace

Status run_zipf_bench(const ZipfBenchOptions& o) {
  LG_ASSIGN_OR_RETURN(ModelConfig base, ModelConfig::load(o.model_dir));
  LG_RETURN_IF_ERROR(ensure_adapters(o.adapters_dir, base, o.num_adapters, o.rank, {LoraModule::kQ, LoraModule::kV}, "qv"));
  EngineOptions eo;
  eo.weight_dtype = parse_weight_type(o.dtype).value();
  eo.max_loras = o.max_loras;
  eo.max_lora_rank = o.rank;
  eo.adapter_host_bytes = o.host_budget_mib << 20;
  eo.max_num_seqs = 64;
  eo.max_num_batched_tokens = 512;
  eo.prefix_caching = false;  // adapter residency is measured, not prompt reuse
  LG_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::load(o.model_dir, eo));
  for (int i = 0; i < o.num_adapters; ++i) {
    LG_RETURN_IF_ERROR(engine->adapters()->add("zipf-" + std::to_string(i), adapter_dir(o.adapters_dir, o.rank, "qv", i)));
  }
  AdapterCache* cache = engine->adapters();
  EngineLoop loop(std::move(engine));

  // Zipf(s) over adapter ranks 1..N, Poisson arrivals at `rate`.
  std::vector<double> cdf(static_cast<size_t>(o.num_adapters));
  double total = 0;
  for (int k = 0; k < o.num_adapters; ++k) cdf[k] = (total += 1.0 / std::pow(k + 1.0, o.zipf_s));
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::exponential_distribution<double> gap(o.rate);
  std::vector<TimingSink> sinks(static_cast<size_t>(o.requests));
  std::vector<int> drawn;
  const BenchClock::time_point start = BenchClock::now();
  BenchClock::time_point next = start;
  for (int i = 0; i < o.requests; ++i) {
    next += std::chrono::duration_cast<BenchClock::duration>(std::chrono::duration<double>(gap(rng)));
    std::this_thread::sleep_until(next);
    const int adapter = static_cast<int>(std::lower_bound(cdf.begin(), cdf.end(), u(rng) * total) - cdf.begin());
    drawn.push_back(adapter);
    GenerationRequest r = greedy_request(o.prompt_len, o.new_tokens, base.vocab_size, i);
    r.adapter = "zipf-" + std::to_string(adapter);
    r.sink = &sinks[i];
    LG_RETURN_IF_ERROR(loop.submit(std::move(r)).status());
  }
  std::vector<double> ttft, e2e;
  int64_t tokens = 0, errors = 0;
  for (TimingSink& s : sinks) {
    const GenerationResult r = s.wait();
    if (r.finish_reason == FinishReason::kError) ++errors;
    ttft.push_back(r.ttft_ms);
    tokens += static_cast<int64_t>(r.output_ids.size());
  }
  const double wall = seconds_since(start);
  std::sort(drawn.begin(), drawn.end());
  const size_t distinct = static_cast<size_t>(std::unique(drawn.begin(), drawn.end()) - drawn.begin());
  const AdapterCacheStats cs = cache->stats();
  std::printf("loragate Zipf benchmark: %d registered rank-%d adapters (q,v), Zipf s=%.2f, %d requests at %.1f/s "
              "(Poisson), prompt %d, %d new tokens, %d slots, host budget %lld MiB, %s weights\n",
              o.num_adapters, o.rank, o.zipf_s, o.requests, o.rate, o.prompt_len, o.new_tokens, o.max_loras,
              static_cast<long long>(o.host_budget_mib), o.dtype.c_str());
  std::printf("distinct adapters drawn: %zu; errors: %lld\n", distinct, static_cast<long long>(errors));
  std::printf("throughput: %.2f requests/s, %.1f generated tokens/s over %.1f s\n", o.requests / wall, tokens / wall, wall);
  std::printf("TTFT ms: p50 %.1f, p90 %.1f, p99 %.1f, max %.1f\n", percentile(ttft, 50), percentile(ttft, 90),
              percentile(ttft, 99), percentile(ttft, 100));
  std::printf("adapter cache: slot hits %lld, host hits %lld, disk loads %lld (mean %.2f ms), host evictions %lld, "
              "slot evictions %lld\n",
              static_cast<long long>(cs.slot_hits), static_cast<long long>(cs.host_hits), static_cast<long long>(cs.loads),
              cs.loads ? cs.load_ms_total / cs.loads : 0.0, static_cast<long long>(cs.host_evictions),
              static_cast<long long>(cs.slot_evictions));
  return Status::ok();
}

}  // namespace loragate::bench
