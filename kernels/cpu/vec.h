// Small vector primitives shared by the CPU ops, each with one fixed
// summation order per length (so results never depend on batching) that
// every ISA follows lane for lane (so they never depend on the CPU either);
// dispatched through best_isa(). The order is in lane_kernels.h.
#pragma once

#include <cstdint>

namespace loragate::cpu {

// sum_j a[j] * b[j]: 32 partial sums of fused multiply-adds, then added in a fixed tree.
float vec_dot(const float* a, const float* b, int64_t n);
// y[j] = fma(p, x[j], y[j])
void vec_axpy(float p, const float* x, float* y, int64_t n);
// s[j] = e^(s[j] - max_i s[i]); returns their sum: a softmax before its
// division (the attention's own exp; n > 0).
float vec_softmax_numerators(float* s, int64_t n);

}  // namespace loragate::cpu
