// Small dense products the trainer needs beside the base's packed matmuls:
// LoRA's rank-r products and their gradients, on f32 row-major matrices.
// Each packs its right-hand side once (cheap: one side is rank-wide) and runs
// the server's matmul kernel. Thread-safe (they use compute_pool()).
#pragma once

#include <cstdint>
#include <vector>

namespace loragate::train {

// y[m, n] (+)= alpha * sum_k x[m, k] * w[n, k]: x [m, k] with row stride ldx,
// w [n, k] contiguous, y with row stride ldy. accumulate: add to y.
void dense_nt(const float* x, int64_t m, int64_t k, int64_t ldx, const float* w, int64_t n, float* y, int64_t ldy,
              float alpha, bool accumulate);

// dst [cols, rows] = src [rows, cols]ᵀ, src with row stride ld.
void transpose(const float* src, int64_t rows, int64_t cols, int64_t ld, std::vector<float>& dst);

}  // namespace loragate::train
