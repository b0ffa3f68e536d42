// Small vector primitives shared by the CPU ops, each with one fixed
// summation order per length (so results never depend on batching), and
// dispatched once to AVX-512 where the CPU has it.
#pragma once

#include <cstdint>

namespace loragate::cpu {

// sum_j a[j] * b[j]
float vec_dot(const float* a, const float* b, int64_t n);
// y[j] += p * x[j]
void vec_axpy(float p, const float* x, float* y, int64_t n);

}  // namespace loragate::cpu
