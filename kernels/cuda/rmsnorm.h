// RMSNorm on the GPU: y[t, :] = x[t, :] / sqrt(mean(x[t, :]^2) + eps) * w.
// Same semantics as cpu::rmsnorm (kernels/cpu/ops.h); pointers are device memory.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace loragate::cuda {

// Launches on `stream` (a cudaStream_t, 0 = default stream) and returns at
// once; errors in the arguments or the launch come back as a Status.
Status rmsnorm(const float* x, const float* weight, float* y, int64_t tokens, int64_t dim, float eps,
               void* stream);

}  // namespace loragate::cuda
