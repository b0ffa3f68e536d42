// f32 -> bf16 on the GPU, for the activations the cuBLASLt projections take
// (gemm_cublaslt.h multiplies bf16 by bf16). Rounds to nearest even and keeps
// NaN a NaN, bit for bit as loragate::f32_to_bf16 (common/dtype.h) does.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace loragate::cuda {

// y[i] = bf16(x[i]) for i < n (raw uint16_t bits). Pointers are device
// memory; launches on `stream` and returns at once.
Status convert_f32_to_bf16(const float* x, uint16_t* y, int64_t n, void* stream);

}  // namespace loragate::cuda
