// Private to matmul_int8_outlier (kernels/cpu/int8_matmul.h): the quantised
// batch every kernel reads, the per-instruction-set kernels, the blocking
// they share, and a way for tests to force a kernel.
//
// The fixed operation order (every kernel follows it, lane for lane, so all
// give bit-identical results). For each row m and output n:
//   dot = sum over k of q[m][k] * w_q[n][k]        exact, in int32 (any order)
//   y   = (float)dot * (sx[m] * s_w[n])            two roundings: sx * s_w, then the product
//   for each outlier k of row m, in increasing k:
//     y = fma(x[m][k], (float)w_q[n][k] * s_w[n], y)   (the weight as dequantize() gives it)
// A row whose non-outlier values are all zero has sx = 0 and a zero dot.
// The int32 sum is exact while K < 2^31 / 127^2 (about 133 000).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/int8_matmul.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_internal.h"

namespace loragate::cpu::detail {

// The int8 dot-product kernels, one per instruction family.
enum class Int8Kernel {
  kScalar,
  kAvx2,        // vpsignb + vpmaddubsw + vpmaddwd
  kAvx512Bw,    // the same on zmm (masked negation: AVX-512 has no vpsignb)
  kAvx512Vnni,  // vpdpbusd on q + 128, less 128 * the weights' sum
};

const char* int8_kernel_name(Int8Kernel kernel);

// The kernel `isa` (which the CPU must support) uses: for AVX-512, VNNI
// where the CPU has it.
Int8Kernel int8_kernel_for(Isa isa);

// Every kernel this CPU runs, scalar first (an AVX-512 VNNI CPU runs the
// AVX-512BW kernel too): what tests iterate over.
std::vector<Int8Kernel> supported_int8_kernels();

// matmul_int8_outlier on the given kernel (which the CPU must run) and with
// `threads` threads of the compute pool (0 = all of them).
void matmul_int8_outlier_with(Int8Kernel kernel, int threads, const float* x, int64_t m, int64_t ldx,
                              const PackedMatrix& w, float threshold, float* y, int64_t ldy,
                              OutlierCounts* counts);

// A batch of activation rows, quantised.
struct Int8Batch {
  int64_t m;
  const int8_t* q;         // row r: int8_quads(K) * 4 values at q + r * q_stride (0 at outliers and past K)
  int64_t q_stride;
  const float* sx;         // row r's scale
  const int64_t* begin;    // row r's outliers: cols[begin[r] .. begin[r + 1]), increasing
  const int32_t* cols;
  const float* x;          // the f32 activations, row r at x + r * ldx
  int64_t ldx;
};

// Computes every row of the batch over W panels [p_begin, p_end) (columns
// p_begin * kNR up to N), writing y[r * ldy + n].
void int8_panels_scalar(const Int8Batch& b, const PackedMatrix& w, float* y, int64_t ldy, int64_t p_begin,
                        int64_t p_end);
void int8_panels_avx2(const Int8Batch& b, const PackedMatrix& w, float* y, int64_t ldy, int64_t p_begin,
                      int64_t p_end);
void int8_panels_avx512bw(const Int8Batch& b, const PackedMatrix& w, float* y, int64_t ldy, int64_t p_begin,
                          int64_t p_end);
void int8_panels_avx512vnni(const Int8Batch& b, const PackedMatrix& w, float* y, int64_t ldy, int64_t p_begin,
                            int64_t p_end);

// Bytes of W panels that every row tile reuses before moving on: they stay
// in L2 (at least 1 MB on every AVX-512 part, 256 KB on older AVX2 ones)
// while tiles stream them, so each weight byte comes from memory once.
inline constexpr int64_t kInt8GroupBytes = 192 * 1024;

// The blocking shared by the vector kernels: panels [p_begin, p_end) in
// groups of about kInt8GroupBytes (all of them when the rows are one tile:
// nothing is reused then, and several panels stream together); within a group, the rows in near-equal
// tiles of at most max_mr (so none is a thin remainder), each run over the
// group's panels np = panels_for(mr) at a time (fewer at the group's end).
// fn(r0, mr, p, np) computes rows [r0, r0 + mr) over panels [p, p + np).
template <class PanelsFor, class Fn>
void for_each_int8_tile(int64_t m, int max_mr, PanelsFor panels_for, int64_t panel_bytes, int64_t p_begin,
                        int64_t p_end, Fn&& fn) {
  const int64_t ntiles = (m + max_mr - 1) / max_mr;
  const int64_t group = ntiles == 1 ? p_end - p_begin : std::max<int64_t>(1, kInt8GroupBytes / panel_bytes);
  for (int64_t g = p_begin; g < p_end; g += group) {
    const int64_t g_end = std::min(p_end, g + group);
    for (int64_t t = 0; t < ntiles; ++t) {
      const int64_t r0 = m * t / ntiles;
      const int mr = static_cast<int>(m * (t + 1) / ntiles - r0);
      const int64_t step = panels_for(mr);
      for (int64_t p = g; p < g_end; p += step) fn(r0, mr, p, static_cast<int>(std::min(step, g_end - p)));
    }
  }
}

}  // namespace loragate::cpu::detail
