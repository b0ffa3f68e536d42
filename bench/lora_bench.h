// The multi-LoRA benchmarks.
//
// run_lora_bench: decode tokens/s of concurrent requests with (a) no adapter,
// (b) one shared adapter, (c) all distinct adapters, and (d) the PEFT-style
// alternative (each adapter merged into the weights, its requests served as
// their own batch, one adapter at a time); plus adapter load times from disk
// and from the host tier.
//
// run_zipf_bench: many registered adapters drawn with Zipf skew under Poisson
// arrivals through the EngineLoop: throughput, TTFT percentiles, cache stats.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace loragate::bench {

struct LoraBenchOptions {
  std::string model_dir;
  std::string adapters_dir;   // synthetic adapters are written here when missing
  std::string dtype = "bf16";
  int num_adapters = 64;      // registered (and written) adapters
  int rank = 16;              // on all seven projections
  int requests = 32;          // concurrent requests
  int prompt_len = 128;
  int new_tokens = 128;
  int reps = 3;
  int merged_sample = 4;      // adapters measured for (d); each costs a full merge and reload
};

struct ZipfBenchOptions {
  std::string model_dir;
  std::string adapters_dir;
  std::string dtype = "bf16";
  int num_adapters = 1000;
  int rank = 8;               // on q_proj and v_proj
  double zipf_s = 1.1;
  int requests = 400;
  double rate = 8.0;          // Poisson arrivals per second
  int prompt_len = 64;
  int new_tokens = 32;
  int max_loras = 32;
  int64_t host_budget_mib = 256;
};

Status run_lora_bench(const LoraBenchOptions& options);
Status run_zipf_bench(const ZipfBenchOptions& options);

}  // namespace loragate::bench
