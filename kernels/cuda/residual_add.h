// The residual connection on the GPU: y[i] += x[i], the semantics of
// cpu::add_inplace (kernels/cpu/ops.h).
#pragma once

#include <cstdint>

#include "common/status.h"

namespace loragate::cuda {

// y, x: n floats of device memory. Launches on `stream` and returns at once.
Status add_inplace(float* y, const float* x, int64_t n, void* stream);

}  // namespace loragate::cuda
