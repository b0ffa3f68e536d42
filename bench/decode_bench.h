// The engine's throughput benchmark: prefill and batched decode tokens/s on a
// model, in f32 and bf16 weights, beside this machine's memory bandwidth and
// FMA peak measured in the same run, as fractions of the decode roofline;
// optionally beside llama.cpp's llama-bench on the same weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace loragate::bench {

struct DecodeBenchOptions {
  std::string model_dir;                 // a Hugging Face model directory
  std::vector<std::string> dtypes = {"f32", "bf16"};
  std::vector<int> batches = {1, 8, 32};
  int prompt_len = 128;                  // tokens per prompt (prefill figure and decode context)
  int decode_steps = 32;                 // timed decode steps per measurement
  int reps = 5;                          // repetitions; medians are reported
  int threads = 0;                       // 0 = all cores
  std::string compare_llamacpp;          // a folder with llama.cpp's llama-bench; "" = no comparison
};

// Runs the benchmark and prints its report to stdout.
Status run_decode_bench(const DecodeBenchOptions& options);

}  // namespace loragate::bench
