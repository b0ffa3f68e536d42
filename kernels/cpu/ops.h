// Element-wise and attention ops of a Llama layer on the CPU, f32.
//
// Each op computes every output element with a fixed sequence of operations
// that does not depend on how many tokens share the call, so batched results
// equal one-at-a-time results bit for bit (batch invariance), and every ISA
// runs that same sequence (lane_kernels.h), so results do not depend on the
// CPU or on LORAGATE_ISA either.
#pragma once

#include <cstdint>

namespace loragate::cpu {

// y[t, :] = x[t, :] / sqrt(mean(x[t, :]^2) + eps) * w, for t < tokens. y may alias x.
void rmsnorm(const float* x, const float* w, float* y, int64_t tokens, int64_t dim, float eps);

// Rotary embedding in Hugging Face's rotate_half convention, in place on
// `x` = [tokens, heads, head_dim] (row stride `row_stride` floats between tokens).
// cos/sin are [tokens, head_dim / 2]: for pair j of token t,
//   (a, b) = (x[j], x[j + d/2]) -> (a·cos − b·sin, b·cos + a·sin).
void rope_rotate_half(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t row_stride,
                      const float* cos, const float* sin);

// out[t, i] = silu(gate_up[t, i]) * gate_up[t, inter + i], gate_up = [tokens, 2 * inter],
// with silu(g) = g / (1 + e^-g) and the project's own exp (lane_kernels.h):
// silu(+inf) = +inf, silu(-inf) = NaN (-inf / inf), and g below about -88 gives 0.
void silu_mul(const float* gate_up, float* out, int64_t tokens, int64_t inter);

// x[t, i] += b[i] for t < tokens, with a row stride of `row_stride` floats.
void add_bias(float* x, const float* b, int64_t tokens, int64_t dim, int64_t row_stride);

// y[i] += x[i].
void add_inplace(float* y, const float* x, int64_t n);

// Index of the largest value (ties -> lowest index; NaNs are skipped; 0 when
// no value is above -inf). n < 2^31.
int64_t argmax(const float* x, int64_t n);

}  // namespace loragate::cpu
