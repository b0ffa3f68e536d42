// W8A8 matmul with LLM.int8()-style outlier decomposition, over int8
// per-channel weights (PackedMatrix of storage kInt8Outlier or kInt8: the
// int8 layout of matmul_internal.h; matmul() runs kInt8 through it with an
// infinite threshold).
//
// For each row m of X, independently of the other rows (so batch invariance
// holds): the columns k with |x[m][k]| > threshold are that row's outliers.
//  - The rest are quantised to int8 with one scale per row,
//    sx = max |x[m][k]| over the non-outlier k / 127, q = round(x / sx),
//    and dotted with the int8 weights in exact int32 arithmetic.
//  - The outliers are computed in f32 against the dequantised weights
//    (w = q_w * s_w, as bitsandbytes does from its int8 copy).
//  y[m][n] = (float)dot * (sx * s_w[n]) + sum over outliers k, in k order,
//            of fma(x[m][k], w[n][k], ·)   (one fixed operation order).
// The integer part is exact, so every ISA (AVX-512 VNNI, AVX2 maddubs,
// scalar) gives bit-identical results.
#pragma once

#include <cstdint>

#include "kernels/cpu/matmul.h"

namespace loragate::cpu {

// Columns seen and columns that were outliers, summed over the rows of calls.
struct OutlierCounts {
  int64_t columns = 0;
  int64_t outliers = 0;
};

// y[m * ldy + n] for m < M, n < W.rows(), as described above; `counts`, if
// given, is incremented. W must have kInt8Outlier storage. x and y must not alias.
void matmul_int8_outlier(const float* x, int64_t m, int64_t ldx, const PackedMatrix& w, float threshold,
                         float* y, int64_t ldy, OutlierCounts* counts = nullptr);

}  // namespace loragate::cpu
