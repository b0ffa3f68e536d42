// The W4A8 matmul of int4 storage: the activation rows are quantised here,
// by one code for every kernel (so the int8 values, block scales and sums
// are the same on every path), then W's panels are split among the compute
// pool's threads (run_quantized) and each thread runs the kernel of the ISA
// over its panels. Operation order: int4_matmul_internal.h.
#include <algorithm>
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/int4_matmul_internal.h"

namespace loragate::cpu::detail {

void quantize_act_rows(const float* x, int64_t ldx, int64_t k, int64_t r0, int64_t r1, int8_t* q, float* sx,
                       float* sq) {
  const int64_t blocks = act_blocks(k);
  for (int64_t r = r0; r < r1; ++r) {
    const float* row = x + r * ldx;
    int8_t* qr = q + r * blocks * kActBlock;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t k0 = b * kActBlock, len = std::min(kActBlock, k - k0);
      float amax = 0;
      bool finite = true;
      for (int64_t i = 0; i < len; ++i) {
        const float a = std::fabs(row[k0 + i]);
        finite = finite && a <= FLT_MAX;  // false for inf and NaN
        amax = std::fmax(amax, a);
      }
      if (!finite && amax <= FLT_MAX) amax = NAN;  // a NaN beside finite values: fmax dropped it
      const float scale = amax / 127.0f;
      int32_t sum = 0;
      for (int64_t i = 0; i < kActBlock; ++i) {
        int8_t v = 0;
        // |x / scale| <= 127 up to rounding; the clamp only guards that.
        if (i < len && finite && scale > 0) {
          v = static_cast<int8_t>(std::clamp(round_to_even(row[k0 + i] / scale), -127.0f, 127.0f));
        }
        qr[k0 + i] = v;
        sum += v;
      }
      sx[r * blocks + b] = scale;
      sq[r * blocks + b] = static_cast<float>(sum);
    }
  }
}

void matmul_int4_with(Int8Kernel kernel, int threads, const float* x, int64_t m, int64_t ldx, const PackedMatrix& w,
                      float* y, int64_t ldy) {
  assert(is_int4(w.storage()));
  const int64_t n = w.rows(), k = w.cols();
  if (m <= 0 || n <= 0) return;
  if (k == 0) {  // an empty sum
    for (int64_t i = 0; i < m; ++i) std::memset(y + i * ldy, 0, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  const int64_t blocks = act_blocks(k);
  thread_local std::vector<int8_t> q;
  thread_local std::vector<float> sx, sq;
  q.resize(static_cast<size_t>(m * blocks * kActBlock));
  sx.resize(static_cast<size_t>(m * blocks));
  sq.resize(static_cast<size_t>(m * blocks));
  const Int4Batch batch{m, blocks, q.data(), sx.data(), sq.data()};
  int8_t* qd = q.data();
  float *sxd = sx.data(), *sqd = sq.data();

  void (*panels_fn)(const Int4Batch&, const PackedMatrix&, float*, int64_t, int64_t, int64_t) = nullptr;
  switch (kernel) {
    case Int8Kernel::kScalar: panels_fn = int4_panels_scalar; break;
    case Int8Kernel::kAvx2: panels_fn = int4_panels_avx2; break;
    case Int8Kernel::kAvx512Bw: panels_fn = int4_panels_avx512bw; break;
    case Int8Kernel::kAvx512Vnni: panels_fn = int4_panels_avx512vnni; break;
  }
  run_quantized(
      threads, m, n, k, [&](int64_t r0, int64_t r1) { quantize_act_rows(x, ldx, k, r0, r1, qd, sxd, sqd); },
      [&](int64_t p0, int64_t p1) { panels_fn(batch, w, y, ldy, p0, p1); });
}

void int4_panels_scalar(const Int4Batch& b, const PackedMatrix& w, float* y, int64_t ldy, int64_t p_begin,
                        int64_t p_end) {
  const WeightType t = w.storage();
  const int64_t n = w.rows(), k = w.cols(), group = int4_group(t);
  const int64_t pb = panel_bytes(t, k), block_bytes = int4_block_bytes(t);
  const bool asym = int4_asymmetric(t);
  const int64_t header = (asym ? 2 : 1) * kNR * 2;
  const auto* base = static_cast<const uint8_t*>(w.data());
  for (int64_t p = p_begin; p < p_end; ++p) {
    const uint8_t* panel = base + p * pb;
    const int valid = static_cast<int>(std::min<int64_t>(kNR, n - p * kNR));
    for (int64_t r = 0; r < b.m; ++r) {
      const int8_t* q = b.q + r * b.blocks * kActBlock;
      for (int j = 0; j < valid; ++j) {
        float acc = 0;
        for (int64_t blk = 0; blk < b.blocks; ++blk) {
          const int64_t k0 = blk * kActBlock;
          const uint8_t* g = panel + (k0 / group) * block_bytes;
          const float s = f16_to_f32(reinterpret_cast<const uint16_t*>(g)[j]);
          const float mn = asym ? f16_to_f32(reinterpret_cast<const uint16_t*>(g + kNR * 2)[j]) : -8.0f * s;
          int32_t dot = 0;
          for (int64_t i = 0; i < kActBlock; ++i) {
            const uint8_t byte = g[header + int4_byte(j, k0 % group + i)];
            dot += static_cast<int32_t>(j < 16 ? byte & 15u : byte >> 4) * q[k0 + i];
          }
          const float term = std::fma(static_cast<float>(dot), s, mn * b.sq[r * b.blocks + blk]);
          acc = std::fma(term, b.sx[r * b.blocks + blk], acc);
        }
        y[r * ldy + p * kNR + j] = acc;
      }
    }
  }
}

}  // namespace loragate::cpu::detail
