// The load-memory benchmark: for each weight storage, loads a model in a
// fresh child process and prints the peak resident memory during the load
// (VmHWM) beside the resident memory once loaded, the weights' own bytes and
// the ratios between them. A load that converted whole tensors in extra
// copies, or kept the file's pages resident, shows as peak well above steady.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace loragate::bench {

struct LoadBenchOptions {
  std::string model_dir;  // a Hugging Face model directory
  std::vector<std::string> dtypes = {"f32", "bf16"};
};

// Resident memory of one load, measured inside the child that did it.
struct LoadMemory {
  long before_kib = 0;  // VmRSS before the load (what the child inherited)
  long peak_kib = 0;    // VmHWM after the load: the most resident at any time
  long steady_kib = 0;  // VmRSS after the load
  double weight_bytes = 0;
  double seconds = 0;
};

// Loads `model_dir` with `storage` weights in a forked child and returns its
// figures. The caller must not have computed yet: a forked child has none
// of its parent's threads, so a compute pool (or OpenMP team) the parent
// started would hang the child's first parallel run.
Result<LoadMemory> measure_load(const std::string& model_dir, const std::string& storage);

// Runs the benchmark and prints its report to stdout.
Status run_load_bench(const LoadBenchOptions& options);

}  // namespace loragate::bench
