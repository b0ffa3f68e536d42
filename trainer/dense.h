// Dense products of the trainer beside the server's own use of its matmul
// kernel: the base's products over a whole batch of tokens, and LoRA's
// rank-r products and their gradients, on f32 row-major matrices.
//
// Training multiplies thousands of token rows by each matrix, so a matrix
// too small for cpu::matmul to split among threads (it splits output
// columns, and keeps a small matrix on one thread) is split by rows of x
// instead. Thread-safe (they use compute_pool()); called from inside a
// compute_pool() run, they run serially on the caller.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/matmul.h"

namespace loragate::train {

// y = x · wᵀ (cpu::matmul's contract), split among the compute threads by
// rows of x when w is small.
void matmul_rows(const float* x, int64_t m, int64_t ldx, const cpu::PackedMatrix& w, float* y, int64_t ldy);

// y[m, n] (+)= alpha * sum_k x[m, k] * w[n, k]: x [m, k] with row stride ldx,
// w [n, k] contiguous, y with row stride ldy. accumulate: add to y.
void dense_nt(const float* x, int64_t m, int64_t k, int64_t ldx, const float* w, int64_t n, float* y, int64_t ldy,
              float alpha, bool accumulate);

// out[r, c] += alpha * sum_t u[t, r] * v[t, c] for r < rows, c < cols, t < n:
// uᵀ · v, the weight-gradient product, reduced over the n token rows of u
// (stride ldu) and v (stride ldv) without transposing either; out has row
// stride ldo. Split among the compute threads by columns of v.
void dense_tn_accumulate(const float* u, int64_t n, int64_t rows, int64_t ldu, const float* v, int64_t cols,
                         int64_t ldv, float* out, int64_t ldo, float alpha);

// dst [cols, rows] = src [rows, cols]ᵀ, src with row stride ld.
void transpose(const float* src, int64_t rows, int64_t cols, int64_t ld, std::vector<float>& dst);

}  // namespace loragate::train
