// Private to the int4 matmul (W4A8: int4 weights times int8 activations),
// which cpu::matmul() runs for every int4 storage: the quantised activations
// every kernel reads, the per-instruction-set kernels and the one operation
// order they all follow. Not for use outside kernels/cpu and its tests.
//
// Activations. Each row of X is cut into blocks of kActBlock = 32 along K
// (the last one zero-padded) and each block is quantised on its own, by one
// scalar code shared by every kernel:
//   sx = amax / 127,  q[k] = round_to_even(x[k] / sx) in [-127, 127],
//   sq = sum of the block's q (exact in f32).
// A block with a non-finite value gets sx = amax / 127 (inf or NaN) and
// q = 0, so the outputs of that row turn non-finite, as an f32 product's do.
//
// Weights (matmul_internal.h's int4 layout): u in [0, 15] per (row, k), an
// f16 scale s and, for asymmetric types, an f16 minimum per (row, group of
// G = 32 or 64 along K); symmetric types use the minimum -8 s (exact).
//
// The operation order, for each row m, output n, block b in increasing
// order (g = the weight group holding block b), starting from acc = +0:
//   dot = sum over the block's k of u[n][k] * q[m][k]        exact, in int32
//   t   = fma((float)dot, s[n][g], min[n][g] * sq[m][b])     (float)dot is exact: |dot| < 2^16
//   acc = fma(t, sx[m][b], acc)
// and y[m][n] = acc. This is w = s * u + min dotted with x = sx * q, summed
// per block. The integer part is exact and the float part is this one
// sequence, so every ISA, tile shape and thread count gives bit-identical
// results, and a row's result never depends on the other rows (batch
// invariance).
#pragma once

#include <cstdint>

#include "kernels/cpu/int8_matmul_internal.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_internal.h"

namespace loragate::cpu::detail {

// k per activation block; a weight group (32 or 64) is one or two blocks.
inline constexpr int64_t kActBlock = 32;
inline int64_t act_blocks(int64_t k) { return (k + kActBlock - 1) / kActBlock; }

// A batch of activation rows, quantised as above.
struct Int4Batch {
  int64_t m;
  int64_t blocks;    // per row
  const int8_t* q;   // row r: blocks * 32 values at q + r * blocks * 32 (0 past K)
  const float* sx;   // row r, block b: sx[r * blocks + b]
  const float* sq;   // the same for the blocks' sums of q
};

// Quantises rows [r0, r1) of x (K = k columns, ldx apart) into the batch's
// buffers (q: blocks * 32 per row; sx, sq: blocks per row).
void quantize_act_rows(const float* x, int64_t ldx, int64_t k, int64_t r0, int64_t r1, int8_t* q, float* sx,
                       float* sq);

// W4A8 matmul on the given kernel (which the CPU must run) with `threads`
// threads of the compute pool (0 = all of them). W must have int4 storage.
void matmul_int4_with(Int8Kernel kernel, int threads, const float* x, int64_t m, int64_t ldx, const PackedMatrix& w,
                      float* y, int64_t ldy);

// Computes every row of the batch over W panels [p_begin, p_end) (columns
// p_begin * kNR up to N), writing y[r * ldy + n].
void int4_panels_scalar(const Int4Batch& b, const PackedMatrix& w, float* y, int64_t ldy, int64_t p_begin,
                        int64_t p_end);
void int4_panels_avx2(const Int4Batch& b, const PackedMatrix& w, float* y, int64_t ldy, int64_t p_begin,
                      int64_t p_end);
void int4_panels_avx512bw(const Int4Batch& b, const PackedMatrix& w, float* y, int64_t ldy, int64_t p_begin,
                          int64_t p_end);
void int4_panels_avx512vnni(const Int4Batch& b, const PackedMatrix& w, float* y, int64_t ldy, int64_t p_begin,
                            int64_t p_end);

}  // namespace loragate::cpu::detail
