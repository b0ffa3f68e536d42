// SwiGLU's gate on the GPU: out[t, i] = silu(gate_up[t, i]) * gate_up[t, inter + i],
// the same semantics as cpu::silu_mul (kernels/cpu/ops.h), including its edge
// cases: silu(+inf) = +inf, silu(-inf) = NaN, and g below about -88 gives 0.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace loragate::cuda {

// gate_up = [tokens, 2 * inter], out = [tokens, inter], device memory.
// Launches on `stream` and returns at once.
Status silu_mul(const float* gate_up, float* out, int64_t tokens, int64_t inter, void* stream);

}  // namespace loragate::cuda
