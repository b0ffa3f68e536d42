#include "bench/decode_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>

#include "bench/bench_util.h"
#include "bench/llamacpp_compare.h"
#include "bench/roofline.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/thread_pool.h"
#include "engine/cpu_model_runner.h"
#include "engine/engine.h"

namespace loragate::bench {
namespace {

// Seconds to prefill one prompt of `len` tokens (one step, whole prompt).
Result<double> time_prefill(Engine& engine, int len) {
  LG_RETURN_IF_ERROR(engine.add_request(greedy_request(len, 1, engine.config().vocab_size, 1)).status());
  const BenchClock::time_point start = BenchClock::now();
  while (engine.has_unfinished()) LG_RETURN_IF_ERROR(engine.step());
  const double s = seconds_since(start);
  engine.take_finished();
  return s;
}

// Decode tokens/s of `batch` sequences at a context of about `len` tokens.
// The token budget holds every prompt, so the first step prefills them all
// and each later step decodes exactly `batch` tokens.
Result<double> time_decode(Engine& engine, int batch, int len, int steps) {
  for (int b = 0; b < batch; ++b) {
    LG_RETURN_IF_ERROR(engine.add_request(greedy_request(len, steps + 1, engine.config().vocab_size, b + 2)).status());
  }
  LG_RETURN_IF_ERROR(engine.step());
  const int64_t before = engine.stats().generated_tokens;
  const BenchClock::time_point start = BenchClock::now();
  while (engine.has_unfinished()) LG_RETURN_IF_ERROR(engine.step());
  const double s = seconds_since(start);
  const int64_t tokens = engine.stats().generated_tokens - before;
  engine.take_finished();
  return static_cast<double>(tokens) / s;
}

struct Figures {
  std::vector<double> prefill_tps;
  std::map<int, std::vector<double>> decode_tps;
};

// Bytes of weights streamed by one decode step (embedding rows aside) and the
// matmul FLOPs of one token.
struct ModelCost {
  double weight_bytes = 0;
  double flops_per_token = 0;  // every layer and the lm_head: a decoded token
  double lm_head_flops = 0;

  // Prefill computes logits for the prompt's last token only, so its tokens
  // cost the layers alone plus one lm_head per prompt (counting the lm_head
  // for every token once overstated prefill's share of the roof by ~1.3x).
  double prefill_flops_per_token(int prompt_len) const {
    return flops_per_token - lm_head_flops + lm_head_flops / prompt_len;
  }
};

ModelCost model_cost(const Engine& engine) {
  const LlamaWeights& w = cpu_model(engine.runner())->weights();  // the benchmark loads on the CPU
  ModelCost cost;
  auto add = [&](const cpu::PackedMatrix& m) {
    cost.weight_bytes += static_cast<double>(m.bytes());
    cost.flops_per_token += 2.0 * static_cast<double>(m.rows()) * static_cast<double>(m.cols());
  };
  for (const LayerWeights& l : w.layers()) {
    add(l.qkv);
    add(l.o);
    add(l.gate_up);
    add(l.down);
  }
  add(w.lm_head());
  cost.lm_head_flops = 2.0 * static_cast<double>(w.lm_head().rows()) * static_cast<double>(w.lm_head().cols());
  return cost;
}

// llama.cpp's medians beside loragate's for each dtype it ran: prefill, and
// decode at b=1 (llama-bench's tg is one sequence).
void print_llamacpp_comparison(const DecodeBenchOptions& o, const LlamaCppComparison& llama,
                               const std::vector<Figures>& figures) {
  std::printf("\nllama.cpp on the same weights (%s, one -r 1 run per rep interleaved with loragate's, medians; "
              "its tg decodes from an empty context, loragate's after the %d-token prompt)\n",
              llama.binary().c_str(), o.prompt_len);
  std::printf("%-13s %-6s %-14s %14s %14s %20s\n", "dtype", "gguf", "figure", "llama.cpp t/s", "loragate t/s",
              "loragate/llama.cpp");
  for (size_t i = 0; i < o.dtypes.size(); ++i) {
    const std::string& d = o.dtypes[i];
    auto skipped = llama.skipped().find(d);
    if (skipped != llama.skipped().end()) {
      std::printf("%-13s no llama.cpp figure: %s\n", d.c_str(), skipped->second.c_str());
      continue;
    }
    std::vector<double> pre, dec;
    for (const LlamaBenchFigures& f : llama.samples(d)) {
      pre.push_back(f.prefill_tps);
      dec.push_back(f.decode_tps);
    }
    if (pre.empty()) continue;
    const std::string gguf(ggml_type_name(llamacpp_type_for(d).value()));
    const double ours_pre = median(figures[i].prefill_tps);
    std::printf("%-13s %-6s %-14s %14.1f %14.1f %19.2fx\n", d.c_str(), gguf.c_str(),
                ("prefill " + std::to_string(o.prompt_len)).c_str(), median(pre), ours_pre, ours_pre / median(pre));
    auto b1 = figures[i].decode_tps.find(1);
    if (b1 == figures[i].decode_tps.end()) {
      std::printf("%-13s %-6s %-14s %14.1f %14s %20s\n", d.c_str(), gguf.c_str(), "decode b=1", median(dec),
                  "(no b=1)", "-");
    } else {
      const double ours_dec = median(b1->second);
      std::printf("%-13s %-6s %-14s %14.1f %14.1f %19.2fx\n", d.c_str(), gguf.c_str(), "decode b=1", median(dec),
                  ours_dec, ours_dec / median(dec));
    }
  }
}

}  // namespace

Status run_decode_bench(const DecodeBenchOptions& o) {
  if (o.threads > 0) cpu::compute_pool().resize(o.threads);
  const int threads = cpu::compute_pool().size();
  std::printf("loragate decode benchmark: model %s, prompt %d, %d decode steps, %d reps, %d threads, matmul %s\n",
              o.model_dir.c_str(), o.prompt_len, o.decode_steps, o.reps, threads, cpu::isa_name(cpu::best_isa()));

  // GGUF files first, so that a comparison that cannot run says so before the timing starts.
  std::unique_ptr<LlamaCppComparison> llama;
  if (!o.compare_llamacpp.empty()) {
    Result<std::unique_ptr<LlamaCppComparison>> prepared =
        LlamaCppComparison::prepare(o.compare_llamacpp, o.model_dir, o.dtypes);
    if (prepared.is_ok()) {
      llama = std::move(prepared.value());
    } else {
      std::printf("llama.cpp comparison skipped: %s\n", prepared.status().message().c_str());
    }
  }

  std::vector<std::unique_ptr<Engine>> engines;
  for (const std::string& d : o.dtypes) {
    EngineOptions eo;
    LG_ASSIGN_OR_RETURN(eo.weight_dtype, parse_weight_type(d));
    const int max_batch = *std::max_element(o.batches.begin(), o.batches.end());
    eo.max_num_seqs = max_batch;
    eo.max_num_batched_tokens = static_cast<int64_t>(max_batch) * o.prompt_len;
    eo.kv_num_blocks = max_batch * ((o.prompt_len + o.decode_steps + 16) / 16 + 1) + 8;
    eo.prefix_caching = false;  // every rep sends the same prompts: a hit would time no prefill
    LG_ASSIGN_OR_RETURN(std::unique_ptr<Engine> e, Engine::load(o.model_dir, eo));
    engines.push_back(std::move(e));
  }

  std::vector<double> triad, fma;
  std::vector<Figures> figures(engines.size());
  for (int rep = 0; rep < o.reps; ++rep) {
    triad.push_back(measure_triad_gbps(threads, 3));
    fma.push_back(measure_peak_fma_gflops(threads, 3));
    for (size_t i = 0; i < engines.size(); ++i) {  // interleave dtypes within each rep
      LG_ASSIGN_OR_RETURN(double s, time_prefill(*engines[i], o.prompt_len));
      figures[i].prefill_tps.push_back(o.prompt_len / s);
      for (int b : o.batches) {
        LG_ASSIGN_OR_RETURN(double tps, time_decode(*engines[i], b, o.prompt_len, o.decode_steps));
        figures[i].decode_tps[b].push_back(tps);
      }
      if (llama) llama->run_once(o.dtypes[i], o.prompt_len, o.decode_steps, threads);
    }
  }

  const double bw = median(triad), peak = median(fma);
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("\nmachine (medians of %d, measured between the runs): triad %.1f GB/s (min %.1f, max %.1f), "
              "peak f32 FMA %.1f GFLOP/s\n",
              o.reps, bw, *std::min_element(triad.begin(), triad.end()), *std::max_element(triad.begin(), triad.end()),
              peak);
  std::printf("peak RSS of the process (all models loaded): %.1f MiB\n\n", ru.ru_maxrss / 1024.0);
  // Speed-ups are against bf16 when it was measured (the storage quantised
  // bases are judged against), else against the first dtype.
  size_t ref = 0;
  for (size_t i = 0; i < o.dtypes.size(); ++i) {
    if (o.dtypes[i] == "bf16") ref = i;
  }
  auto vs_ref = [&](size_t i, double v, double ref_v) {
    if (i == ref) return std::string();
    char text[64];
    std::snprintf(text, sizeof text, "   %.2fx %s", v / ref_v, o.dtypes[ref].c_str());
    return std::string(text);
  };
  std::printf("%-13s %-14s %12s %14s %14s %10s\n", "dtype", "figure", "tokens/s", "roofline t/s", "bound", "of roof");
  for (size_t i = 0; i < engines.size(); ++i) {
    const ModelCost cost = model_cost(*engines[i]);
    const std::string& d = o.dtypes[i];
    const double pre = median(figures[i].prefill_tps);
    const double pre_roof = peak * 1e9 / cost.prefill_flops_per_token(o.prompt_len);
    std::printf("%-13s %-14s %12.1f %14.1f %14s %9.1f%%%s\n", d.c_str(),
                ("prefill " + std::to_string(o.prompt_len)).c_str(), pre, pre_roof, "compute", 100.0 * pre / pre_roof,
                vs_ref(i, pre, median(figures[ref].prefill_tps)).c_str());
    for (int b : o.batches) {
      const double tps = median(figures[i].decode_tps[b]);
      // A decode step streams every weight once and does batch × flops_per_token.
      const double bw_roof = b * bw * 1e9 / cost.weight_bytes;
      const double fl_roof = peak * 1e9 / cost.flops_per_token;
      const bool memory_bound = bw_roof < fl_roof;
      const double roof = std::min(bw_roof, fl_roof);
      std::printf("%-13s %-14s %12.1f %14.1f %14s %9.1f%%   (bandwidth roof %.1f: %.1f%%, compute roof %.1f: %.1f%%)%s\n",
                  d.c_str(), ("decode b=" + std::to_string(b)).c_str(), tps, roof, memory_bound ? "bandwidth" : "compute",
                  100.0 * tps / roof, bw_roof, 100.0 * tps / bw_roof, fl_roof, 100.0 * tps / fl_roof,
                  vs_ref(i, tps, median(figures[ref].decode_tps[b])).c_str());
    }
    std::printf("%-13s weights %.1f MiB, KV cache %.1f MiB, %.3f GFLOP per decoded token, %.3f per prompt token\n",
                d.c_str(), engines[i]->runner().weights_bytes() / 1048576.0,
                engines[i]->kv_cache_bytes() / 1048576.0, cost.flops_per_token / 1e9,
                cost.prefill_flops_per_token(o.prompt_len) / 1e9);
  }
  if (llama) print_llamacpp_comparison(o, *llama, figures);
  return Status::ok();
}

}  // namespace loragate::bench
