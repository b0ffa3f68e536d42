// A projection's bias on the GPU (Qwen2's q/k/v): x[t, i] += b[i], the
// semantics of cpu::add_bias (kernels/cpu/ops.h).
#pragma once

#include <cstdint>

#include "common/status.h"

namespace loragate::cuda {

// x: `tokens` rows of `dim` floats, `row_stride` floats apart; b: [dim].
// Device memory; launches on `stream` and returns at once.
Status add_bias(float* x, const float* b, int64_t tokens, int64_t dim, int64_t row_stride, void* stream);

}  // namespace loragate::cuda
