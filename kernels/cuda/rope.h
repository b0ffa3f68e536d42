// Rotary embedding on the GPU, in place, in Hugging Face's rotate_half
// convention: the same semantics as cpu::rope_rotate_half (kernels/cpu/ops.h).
#pragma once

#include <cstdint>

#include "common/status.h"

namespace loragate::cuda {

// x = [tokens, heads, head_dim] with `row_stride` floats between tokens;
// cos/sin = [tokens, head_dim / 2]. For pair j of each head of token t,
//   (a, b) = (x[j], x[j + d/2]) -> (a·cos − b·sin, b·cos + a·sin).
// In a fused QKV row the q heads and then the k heads lie side by side, so one
// call with heads = q_heads + kv_heads and row_stride = the QKV width rotates
// both. Pointers are device memory; launches on `stream` and returns at once.
Status rope_rotate_half(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t row_stride,
                        const float* cos, const float* sin, void* stream);

}  // namespace loragate::cuda
