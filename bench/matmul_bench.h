// The weight-matmul kernels alone: GFLOP/s of y = x · Wᵀ for M rows against
// the FMA peak of the ISA the kernels run on (LORAGATE_ISA forces one), and
// for single rows GB/s of weights against the STREAM triad, both probed in
// the same run, interleaved with the measurements.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace loragate::bench {

struct MatmulBenchOptions {
  std::vector<int64_t> rows = {1, 4, 8, 32, 128};  // M
  int64_t out = 2048;                              // N (weight rows)
  int64_t in = 2048;                               // K
  std::vector<std::string> dtypes = {"f32", "bf16"};
  int reps = 5;                                    // medians reported
};

// Runs the benchmark and prints its report to stdout.
Status run_matmul_bench(const MatmulBenchOptions& options);

}  // namespace loragate::bench
