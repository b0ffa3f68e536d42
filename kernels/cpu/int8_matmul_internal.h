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

#include "kernels/cpu/cache_info.h"
#include "kernels/cpu/int8_matmul.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/thread_pool.h"

namespace loragate::cpu::detail {

// std::nearbyint (ties to even, in the default rounding mode) for |v| < 2^22,
// inline: adding 1.5 * 2^23 leaves no fraction bits, so the sum rounds to an
// integer, and subtracting it back is exact. A libm nearbyintf call (the
// baseline x86-64 has no roundss) costs more than the rest of a row's
// quantisation together. Shared by the int8 and int4 activation quantisers.
inline float round_to_even(float v) {
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23
  return (v + kShift) - kShift;
}

// The threading of the integer matmuls: W's panels are split among the
// compute pool's threads in contiguous ranges, as matmul() splits them, so
// each weight byte is read once and K is never split. The activation rows
// are quantised first, by quantize(r0, r1) over disjoint row ranges: for a
// single row before the threads start (no barrier for decode), otherwise
// spread over the threads and followed by a barrier. Then
// panels(p0, p1) runs on each thread's panels.
template <class Quantize, class Panels>
void run_quantized(int threads, int64_t m, int64_t n, int64_t k, const Quantize& quantize, const Panels& panels) {
  const int64_t npanels = num_panels(n);
  ThreadPool& pool = compute_pool();
  int nthreads = threads > 0 ? threads : pool.size();
  if (n * k < kMinParallelWeights) nthreads = 1;
  nthreads = static_cast<int>(std::min<int64_t>(nthreads, npanels));
  if (m == 1) quantize(0, 1);
  pool.run(nthreads, [&](int thread, int nt) {
    if (m > 1) {  // (the same on every thread)
      quantize(m * thread / nt, m * (thread + 1) / nt);
      ThreadPool::barrier();  // every row is quantised before any kernel reads it
    }
    const int64_t p0 = npanels * thread / nt, p1 = npanels * (thread + 1) / nt;
    if (p0 < p1) panels(p0, p1);
  });
}

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

// Bytes of W panels that every row tile reuses before moving on: a quarter
// of the core's L2 (cpuid), so they stay there while the tiles stream them
// beside the activations and the next group's prefetched lines, and each
// weight byte comes from memory once: 512 KiB on a 2 MiB Sapphire Rapids
// core, 128 KiB on a 512 KiB Zen 3 one.
inline int64_t int_group_bytes() { return cache_sizes().l2 / 4; }

// The blocking shared by the vector kernels: panels [p_begin, p_end) in
// groups of about int_group_bytes() (all of them when the rows are one tile:
// nothing is reused then, and several panels stream together); within a group, the rows in near-equal
// tiles of at most max_mr (so none is a thin remainder), each run over the
// group's panels np = panels_for(mr) at a time (fewer at the group's end).
// fn(r0, mr, p, np) computes rows [r0, r0 + mr) over panels [p, p + np).
template <class PanelsFor, class Fn>
void for_each_int8_tile(int64_t m, int max_mr, PanelsFor panels_for, int64_t panel_bytes, int64_t p_begin,
                        int64_t p_end, Fn&& fn) {
  const int64_t ntiles = (m + max_mr - 1) / max_mr;
  const int64_t group = ntiles == 1 ? p_end - p_begin : std::max<int64_t>(1, int_group_bytes() / panel_bytes);
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
