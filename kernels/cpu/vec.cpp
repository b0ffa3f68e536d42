// The kernels are written once for every ISA in lane_kernels.h.
#include "kernels/cpu/vec.h"

#include "kernels/cpu/ops_internal.h"

namespace loragate::cpu {

float vec_dot(const float* a, const float* b, int64_t n) { return detail::ops().vec_dot(a, b, n); }

void vec_axpy(float p, const float* x, float* y, int64_t n) { detail::ops().vec_axpy(p, x, y, n); }

float vec_softmax_numerators(float* s, int64_t n) { return detail::ops().softmax_numerators(s, n); }

}  // namespace loragate::cpu
