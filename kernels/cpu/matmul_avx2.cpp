// AVX2 kernels for x86-64 CPUs without AVX-512: the same panels and the same
// per-output FMA order as the AVX-512 path (so bit-identical results), with
// 8-lane vectors and only sixteen ymm registers.
//
// Two shapes, both one FMA per k per output, k in order:
//  - Few rows (M = 1..3; bf16 1..2, decode): the tile spans whole 32-column panels
//    (4 ymm per row; one row streams 2 panels for 8 chains). Bandwidth bound.
//  - Tiles of 4..6 rows (bf16 3..6; prefill, batched decode): the register-blocked GEMM
//    micro-kernel, MR x 16 over half a panel: 2 * MR accumulators, 2 weight
//    vectors and a broadcast fill 15 of the 16 registers, and each k costs
//    one or two weight loads and MR broadcasts for 2 * MR FMAs, so the FMA
//    units, not loads, set the pace. Every tile passes over a panel (the
//    panel stays in L2) before the next one, which is prefetched meanwhile.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/matmul_internal.h"

#define LG_AVX2 __attribute__((target("avx2,fma")))

namespace loragate::cpu::detail {
namespace {

constexpr int64_t kPrefetchBytes = 1024;
// Tiles this tall use the half-panel micro-kernel. Three bf16 rows over a
// whole panel need 12 accumulators + 4 weights + the widening mask + a
// broadcast, one register too many: measured 45% of the FMA peak against 67%
// on half panels; three f32 rows fit and run at 84% (54% on half panels).
constexpr int min_gemm_rows(bool bf16) { return bf16 ? 3 : 4; }

// Stores the first `valid` (0..8) lanes of v at y.
LG_AVX2 inline void store_lanes(float* y, __m256 v, int64_t valid) {
  if (valid >= 8) {
    _mm256_storeu_ps(y, v);
  } else if (valid > 0) {  // the zero-padded last panel
    alignas(32) float tmp[8];
    _mm256_store_ps(tmp, v);
    std::memcpy(y, tmp, static_cast<size_t>(valid) * sizeof(float));
  }
}

LG_AVX2 inline int64_t clamp8(int64_t v) { return std::clamp<int64_t>(v, 0, 8); }

// Loads the 32 weights of one k-slice as 4 x 8 floats, columns in order.
template <bool BF16>
LG_AVX2 inline void load_slice(const uint8_t* wp, __m256 out[4]) {
  if constexpr (BF16) {
    // 32-bit lane j of the first half holds columns j (low) and 16 + j (high);
    // of the second half, columns 8 + j and 24 + j (see matmul_internal.h).
    const __m256i hi = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
    const __m256i a = _mm256_load_si256(reinterpret_cast<const __m256i*>(wp));
    const __m256i b = _mm256_load_si256(reinterpret_cast<const __m256i*>(wp + 32));
    out[0] = _mm256_castsi256_ps(_mm256_slli_epi32(a, 16));
    out[1] = _mm256_castsi256_ps(_mm256_slli_epi32(b, 16));
    out[2] = _mm256_castsi256_ps(_mm256_and_si256(a, hi));
    out[3] = _mm256_castsi256_ps(_mm256_and_si256(b, hi));
  } else {
    for (int q = 0; q < 4; ++q) out[q] = _mm256_load_ps(reinterpret_cast<const float*>(wp) + 8 * q);
  }
}

// Few rows over NP whole panels.
template <int MR, int NP, bool BF16>
LG_AVX2 void kernel_rows(const float* xp, const uint8_t* w, int64_t panel_bytes, int64_t k, float* y,
                         int64_t ldy, int64_t n_valid) {
  constexpr int64_t kStep = BF16 ? 64 : 128;
  __m256 acc[MR][NP][4];
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p)
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) acc[r][p][q] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k; ++i) {
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) {
      const uint8_t* wp = w + p * panel_bytes;
      _mm_prefetch(reinterpret_cast<const char*>(wp + kPrefetchBytes), _MM_HINT_T0);
      if constexpr (!BF16) _mm_prefetch(reinterpret_cast<const char*>(wp + kPrefetchBytes + 64), _MM_HINT_T0);
      __m256 wv[4];
      load_slice<BF16>(wp, wv);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        const __m256 xb = _mm256_broadcast_ss(xp + r);
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) acc[r][p][q] = _mm256_fmadd_ps(xb, wv[q], acc[r][p][q]);
      }
    }
    xp += MR;
    w += kStep;
  }
#pragma GCC unroll 2
  for (int p = 0; p < NP; ++p) {
    const int64_t valid = n_valid - p * kNR;
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) store_lanes(y + r * ldy + p * kNR + 8 * q, acc[r][p][q], clamp8(valid - 8 * q));
    }
  }
}

// A region of the next panel to pull into L2 during one micro-kernel call,
// walked evenly over its k loop (16.16 fixed-point bytes per k).
struct NextPanel {
  const uint8_t* base = nullptr;  // nullptr: nothing to prefetch
  int64_t step = 0;
};

// The GEMM micro-kernel: MR rows x the 16 columns of half `h` of one panel.
// F32: half h is floats 16h..16h+15 of each 128-byte k-slice (one cache
// line). BF16: half h is bytes 32h..32h+31 of the 64-byte slice, whose
// lanes widen to columns 8h..8h+7 (low halves) and 16+8h..23+8h (high).
template <int MR, bool BF16>
LG_AVX2 void kernel_half(const float* xp, const uint8_t* w, int h, int64_t k, float* y, int64_t ldy,
                         int64_t n_valid, NextPanel next) {
  constexpr int64_t kStep = BF16 ? 64 : 128;
  __m256 acc0[MR], acc1[MR];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  const __m256i hi = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  w += BF16 ? 32 * h : 64 * h;
  for (int64_t i = 0; i < k; ++i) {
    if (next.base != nullptr && (i & 1) == 0)
      _mm_prefetch(reinterpret_cast<const char*>(next.base + ((i * next.step) >> 16)), _MM_HINT_T1);
    __m256 w0, w1;
    if constexpr (BF16) {
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(w));
      w0 = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
      w1 = _mm256_castsi256_ps(_mm256_and_si256(v, hi));
    } else {
      w0 = _mm256_load_ps(reinterpret_cast<const float*>(w));
      w1 = _mm256_load_ps(reinterpret_cast<const float*>(w) + 8);
    }
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m256 xb = _mm256_broadcast_ss(xp + r);
      acc0[r] = _mm256_fmadd_ps(xb, w0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(xb, w1, acc1[r]);
    }
    xp += MR;
    w += kStep;
  }
  // Output columns of the two accumulators within the panel.
  const int64_t c0 = BF16 ? 8 * h : 16 * h, c1 = BF16 ? 16 + 8 * h : 16 * h + 8;
  // Unrolled so every accumulator index is a constant: a loop over r would
  // make GCC keep the arrays in memory and store them on every k.
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    store_lanes(y + r * ldy + c0, acc0[r], clamp8(n_valid - c0));
    store_lanes(y + r * ldy + c1, acc1[r], clamp8(n_valid - c1));
  }
}

template <bool BF16>
void run_half(const Tile& tile, const uint8_t* wp, int h, int64_t k, float* yp, int64_t ldy, int64_t nv,
              NextPanel next) {
  switch (tile.mr) {  // 1..3: the short tile of M = 7 (3 + 4), and bf16 M = 3
    case 1: kernel_half<1, BF16>(tile.xp, wp, h, k, yp, ldy, nv, next); break;
    case 2: kernel_half<2, BF16>(tile.xp, wp, h, k, yp, ldy, nv, next); break;
    case 3: kernel_half<3, BF16>(tile.xp, wp, h, k, yp, ldy, nv, next); break;
    case 4: kernel_half<4, BF16>(tile.xp, wp, h, k, yp, ldy, nv, next); break;
    case 5: kernel_half<5, BF16>(tile.xp, wp, h, k, yp, ldy, nv, next); break;
    default: kernel_half<6, BF16>(tile.xp, wp, h, k, yp, ldy, nv, next); break;
  }
}

template <bool BF16>
void run(const Tile* tiles, int ntiles, int64_t ldy, const PackedMatrix& w, int64_t p_begin, int64_t p_end) {
  const int64_t k = w.cols(), n = w.rows();
  const int64_t panel_bytes = k * kNR * (BF16 ? 2 : 4);
  const auto* base = static_cast<const uint8_t*>(w.data());

  if (ntiles > 1 || tiles[0].mr >= min_gemm_rows(BF16)) {
    // GEMM: every tile and both halves pass over panel p; each pass pulls its
    // share of panel p + 1 into L2, so the next tile 0 finds it there.
    const int64_t passes = 2 * ntiles;
    const int64_t share = panel_bytes / passes;
    for (int64_t p = p_begin; p < p_end; ++p) {
      const uint8_t* wp = base + p * panel_bytes;
      for (int t = 0; t < ntiles; ++t) {
        for (int h = 0; h < 2; ++h) {
          NextPanel next;
          if (p + 1 < p_end) {
            next.base = wp + panel_bytes + (2 * t + h) * share;
            next.step = (share << 16) / k;
          }
          run_half<BF16>(tiles[t], wp, h, k, tiles[t].y + p * kNR, ldy, n - p * kNR, next);
        }
      }
    }
    return;
  }

  // Few rows: one pass over the weights, a row streaming two panels at once.
  const Tile& tile = tiles[0];
  for (int64_t p = p_begin; p < p_end;) {
    const uint8_t* wp = base + p * panel_bytes;
    float* yp = tile.y + p * kNR;
    const int64_t nv = n - p * kNR;
    if (tile.mr == 1 && p + 2 <= p_end) {
      kernel_rows<1, 2, BF16>(tile.xp, wp, panel_bytes, k, yp, ldy, nv);
      p += 2;
      continue;
    }
    switch (tile.mr) {
      case 1: kernel_rows<1, 1, BF16>(tile.xp, wp, panel_bytes, k, yp, ldy, nv); break;
      case 2: kernel_rows<2, 1, BF16>(tile.xp, wp, panel_bytes, k, yp, ldy, nv); break;
      default: kernel_rows<3, 1, BF16>(tile.xp, wp, panel_bytes, k, yp, ldy, nv); break;
    }
    p += 1;
  }
}

}  // namespace

void run_panels_avx2(const Tile* tiles, int ntiles, int64_t ldy, const PackedMatrix& w, int64_t p_begin,
                     int64_t p_end) {
  if (w.storage() == WeightType::kBF16)
    run<true>(tiles, ntiles, ldy, w, p_begin, p_end);
  else
    run<false>(tiles, ntiles, ldy, w, p_begin, p_end);
}

}  // namespace loragate::cpu::detail
