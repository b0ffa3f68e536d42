// The kernels are written once for every ISA in lane_kernels.h.
#include "kernels/cpu/ops.h"

#include "kernels/cpu/ops_internal.h"

namespace loragate::cpu {

void rmsnorm(const float* x, const float* w, float* y, int64_t tokens, int64_t dim, float eps) {
  detail::ops().rmsnorm(x, w, y, tokens, dim, eps);
}

void rope_rotate_half(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t row_stride,
                      const float* cos, const float* sin) {
  detail::ops().rope_rotate_half(x, tokens, heads, head_dim, row_stride, cos, sin);
}

void silu_mul(const float* gate_up, float* out, int64_t tokens, int64_t inter) {
  detail::ops().silu_mul(gate_up, out, tokens, inter);
}

void add_bias(float* x, const float* b, int64_t tokens, int64_t dim, int64_t row_stride) {
  detail::ops().add_bias(x, b, tokens, dim, row_stride);
}

void add_inplace(float* y, const float* x, int64_t n) { detail::ops().add_inplace(y, x, n); }

int64_t argmax(const float* x, int64_t n) { return detail::ops().argmax(x, n); }

}  // namespace loragate::cpu
