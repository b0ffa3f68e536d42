// AVX2 kernels for int8 / int4 panels (layout in matmul_internal.h).
//
// Weights are dequantised exactly as dequantize() does it (int8:
// (float)q * scale; int4: fma((float)u, s, min)) and then used like f32
// weights: one accumulator per 8 outputs, one FMA per k, k in order, so
// results equal the scalar reference (and AVX-512) bit for bit.
//
// Shapes:
//  - one row alone (decode): kernel_row dequantises the whole panel in
//    registers (4 accumulators, 4 scales, 4 minimums) and streams it with
//    prefetch ahead; bound by the widening more than by memory.
//  - anything taller, or several tiles (prefill, batched decode): sixteen
//    ymm cannot hold a tile's accumulators next to the scales, and the
//    widening would be repeated for every tile, so each chunk of 256 k of a
//    panel is dequantised once into an L1 buffer of f32, and every tile runs
//    f32 register-blocked kernels over it (as matmul_avx2.cpp: whole panels
//    for 1..3 rows, MR x 16 halves for 4..6), its partial sums kept in y
//    between chunks (exact: a store and a reload).
//
// 8-row group q of a line: int8 quad lines, the 32 bytes at 32q (a lane =
// one row's four k, k-th byte = srai(slli(lane, 24 - 8k), 24)); int4 pair
// lines, the 8 bytes at 8q (a byte = one row's two k, low nibble first).
#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/matmul_internal.h"

#define LG_AVX2 __attribute__((target("avx2,fma,f16c")))
#define LG_INLINE inline __attribute__((always_inline))

namespace loragate::cpu::detail {
namespace {

constexpr int kMaxChunkMR = 6;  // tallest tile of the chunked path (2 * 6 accumulators + 3 fit 16 ymm)
// k per dequantised chunk: 32 KB of f32 weights, which stay in L1 while
// every tile passes over them.
constexpr int64_t kChunk = 256;
constexpr int64_t kAhead = 4096;  // decode prefetch distance: bytes in flight to cover DRAM latency

LG_AVX2 LG_INLINE void prefetch(const uint8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }

// Stores the first `valid` (clamped to 0..8) lanes of v at y.
LG_AVX2 LG_INLINE void store_lanes(float* y, __m256 v, int64_t valid) {
  if (valid >= 8) {
    _mm256_storeu_ps(y, v);
  } else if (valid > 0) {  // the zero-padded last panel
    alignas(32) float tmp[8];
    _mm256_store_ps(tmp, v);
    std::memcpy(y, tmp, static_cast<size_t>(valid) * sizeof(float));
  }
}

// k-th (0..3) int8 weight of each lane's quad, dequantised.
template <int KK>
LG_AVX2 LG_INLINE __m256 int8_weights(__m256i v, __m256 scale) {
  const __m256i q = KK == 3 ? _mm256_srai_epi32(v, 24) : _mm256_srai_epi32(_mm256_slli_epi32(v, 24 - 8 * KK), 24);
  return _mm256_mul_ps(_mm256_cvtepi32_ps(q), scale);
}

// One pair line (PAIR) or only its first k (the odd end of K), all 32 rows.
template <bool PAIR>
LG_AVX2 LG_INLINE void int4_line(__m256 (&acc)[4], const uint8_t* line, const float* x, const __m256 (&s)[4],
                                 const __m256 (&m)[4]) {
  const __m256i low = _mm256_set1_epi32(15);
  const __m256 x0 = _mm256_broadcast_ss(x);
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    const __m256i u = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(line + 8 * q)));
    const __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(u, low));
    acc[q] = _mm256_fmadd_ps(x0, _mm256_fmadd_ps(lo, s[q], m[q]), acc[q]);
    if constexpr (PAIR) {
      const __m256 hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(u, 4));
      acc[q] = _mm256_fmadd_ps(_mm256_broadcast_ss(x + 1), _mm256_fmadd_ps(hi, s[q], m[q]), acc[q]);
    }
  }
}

// One row x the panel at w; y is the panel's column 0. G: int4 group (0 =
// int8); ASYM: stored minimums.
template <int G, bool ASYM>
LG_AVX2 void kernel_row(const float* x, const uint8_t* w, int64_t k, float* y, int64_t n_valid) {
  __m256 acc[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) acc[q] = _mm256_setzero_ps();

  if constexpr (G == 0) {
    __m256 sc[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) sc[q] = _mm256_load_ps(reinterpret_cast<const float*>(w) + 8 * q);
    const uint8_t* line = w + kInt8ScaleBytes;
    const int64_t quads = k / 4;
    for (int64_t i = 0; i < quads; ++i) {
      prefetch(line + kAhead);
      prefetch(line + kAhead + 64);
      const __m256 x0 = _mm256_broadcast_ss(x), x1 = _mm256_broadcast_ss(x + 1);
      const __m256 x2 = _mm256_broadcast_ss(x + 2), x3 = _mm256_broadcast_ss(x + 3);
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(line + 32 * q));
        acc[q] = _mm256_fmadd_ps(x0, int8_weights<0>(v, sc[q]), acc[q]);
        acc[q] = _mm256_fmadd_ps(x1, int8_weights<1>(v, sc[q]), acc[q]);
        acc[q] = _mm256_fmadd_ps(x2, int8_weights<2>(v, sc[q]), acc[q]);
        acc[q] = _mm256_fmadd_ps(x3, int8_weights<3>(v, sc[q]), acc[q]);
      }
      x += 4;
      line += kNR * 4;
    }
    if (const int64_t rem = k % 4; rem != 0) {  // the last, partial quad: x stops at K
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(line + 32 * q));
        acc[q] = _mm256_fmadd_ps(_mm256_broadcast_ss(x), int8_weights<0>(v, sc[q]), acc[q]);
        if (rem > 1) acc[q] = _mm256_fmadd_ps(_mm256_broadcast_ss(x + 1), int8_weights<1>(v, sc[q]), acc[q]);
        if (rem > 2) acc[q] = _mm256_fmadd_ps(_mm256_broadcast_ss(x + 2), int8_weights<2>(v, sc[q]), acc[q]);
      }
    }
  } else {
    constexpr int64_t kHeader = (ASYM ? 2 : 1) * kNR * 2;
    constexpr int64_t kBlock = kHeader + kNR / 2 * G;
    const __m256 minus8 = _mm256_set1_ps(-8.0f);
    for (int64_t g0 = 0; g0 < k; g0 += G, w += kBlock) {
      prefetch(w + kAhead);
      if constexpr (ASYM) prefetch(w + kAhead + 64);
      __m256 s[4], m[4];
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        s[q] = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(w + 16 * q)));
        m[q] = ASYM ? _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(w + 64 + 16 * q)))
                    : _mm256_mul_ps(s[q], minus8);
      }
      const int64_t len = std::min<int64_t>(G, k - g0), pairs = len / 2;
      const uint8_t* line = w + kHeader;
      for (int64_t j = 0; j + 2 <= pairs; j += 2) {  // two pairs (a cache line) per iteration
        prefetch(line + kAhead);
        int4_line<true>(acc, line, x, s, m);
        int4_line<true>(acc, line + kNR, x + 2, s, m);
        line += 2 * kNR;
        x += 4;
      }
      if (pairs % 2 != 0) {
        int4_line<true>(acc, line, x, s, m);
        line += kNR;
        x += 2;
      }
      if (len % 2 != 0) int4_line<false>(acc, line, x, s, m);  // odd K: the last pair has only its first k
    }
  }

#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) store_lanes(y + 8 * q, acc[q], n_valid - 8 * q);
}

// Dequantises k = k0..k1-1 of a panel into buf, 32 floats per k in column
// order: the weights kernel_f32 reads. Prefetches `ahead` bytes ahead in the
// panel's stream (into L2: the buffer and x fill L1).
template <int G, bool ASYM>
LG_AVX2 void dequantize_chunk(const uint8_t* panel, int64_t k0, int64_t k1, float* buf, int64_t ahead) {
  if constexpr (G == 0) {
    __m256 sc[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) sc[q] = _mm256_load_ps(reinterpret_cast<const float*>(panel) + 8 * q);
    const uint8_t* line = panel + kInt8ScaleBytes + k0 / 4 * kNR * 4;
    for (int64_t c = k0; c < k1; c += 4, line += kNR * 4, buf += 4 * kNR) {
      _mm_prefetch(reinterpret_cast<const char*>(line + ahead), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(line + ahead + 64), _MM_HINT_T1);
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(line + 32 * q));
        // Lanes past K are written but never read (kernel_f32 stops at k1).
        _mm256_store_ps(buf + 8 * q, int8_weights<0>(v, sc[q]));
        _mm256_store_ps(buf + kNR + 8 * q, int8_weights<1>(v, sc[q]));
        _mm256_store_ps(buf + 2 * kNR + 8 * q, int8_weights<2>(v, sc[q]));
        _mm256_store_ps(buf + 3 * kNR + 8 * q, int8_weights<3>(v, sc[q]));
      }
    }
  } else {
    constexpr int64_t kHeader = (ASYM ? 2 : 1) * kNR * 2;
    constexpr int64_t kBlock = kHeader + kNR / 2 * G;
    const __m256 minus8 = _mm256_set1_ps(-8.0f);
    const __m256i low = _mm256_set1_epi32(15);
    const uint8_t* b = panel + k0 / G * kBlock;
    for (int64_t g0 = k0; g0 < k1; g0 += G, b += kBlock) {
      __m256 s[4], m[4];
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        s[q] = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(b + 16 * q)));
        m[q] = ASYM ? _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(b + 64 + 16 * q)))
                    : _mm256_mul_ps(s[q], minus8);
      }
      // Whole pairs; a pair's second k past K is zero, never read.
      const uint8_t* line = b + kHeader;
      const int64_t pairs = (std::min<int64_t>(G, k1 - g0) + 1) / 2;
      for (int64_t j = 0; j < pairs; ++j, line += kNR, buf += 2 * kNR) {
        if (j % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(line + ahead), _MM_HINT_T1);
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          const __m256i u = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(line + 8 * q)));
          const __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(u, low));
          const __m256 hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(u, 4));
          _mm256_store_ps(buf + 8 * q, _mm256_fmadd_ps(lo, s[q], m[q]));
          _mm256_store_ps(buf + kNR + 8 * q, _mm256_fmadd_ps(hi, s[q], m[q]));
        }
      }
    }
  }
}

// MR rows x columns [c0, c0 + 8 * NQ) of a panel over `kc` dequantised k
// (buf), as the f32 kernels do it: whole panels for up to 3 rows (4 * MR
// accumulators, the weights read from L1 as operands), halves (NQ = 2) for
// taller tiles (2 * MR accumulators, 2 weights, a broadcast). The
// accumulators start at 0 (first chunk) or resume from the partial sums the
// previous chunk left in y: a store and a reload are exact.
template <int MR, int NQ>
LG_AVX2 void kernel_f32(const float* xp, const float* buf, int c0, int64_t kc, bool resume, float* y,
                        int64_t ldy, int64_t n_valid) {
  y += c0;
  buf += c0;
  const int64_t valid = n_valid - c0;
  __m256 acc[MR][NQ];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    if (resume && valid >= 8 * NQ) {
#pragma GCC unroll 4
      for (int q = 0; q < NQ; ++q) acc[r][q] = _mm256_loadu_ps(y + r * ldy + 8 * q);
    } else if (resume) {  // the ragged last panel
      alignas(32) float tmp[8 * NQ] = {};
      std::memcpy(tmp, y + r * ldy, static_cast<size_t>(std::max<int64_t>(valid, 0)) * sizeof(float));
#pragma GCC unroll 4
      for (int q = 0; q < NQ; ++q) acc[r][q] = _mm256_load_ps(tmp + 8 * q);
    } else {
#pragma GCC unroll 4
      for (int q = 0; q < NQ; ++q) acc[r][q] = _mm256_setzero_ps();
    }
  }
  for (int64_t i = 0; i < kc; ++i) {
    __m256 wv[NQ];
#pragma GCC unroll 4
    for (int q = 0; q < NQ; ++q) wv[q] = _mm256_load_ps(buf + 8 * q);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256 xb = _mm256_broadcast_ss(xp + r);
#pragma GCC unroll 4
      for (int q = 0; q < NQ; ++q) acc[r][q] = _mm256_fmadd_ps(xb, wv[q], acc[r][q]);
    }
    xp += MR;
    buf += kNR;
  }
  // Unrolled so every accumulator index is a constant.
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int q = 0; q < NQ; ++q) store_lanes(y + r * ldy + 8 * q, acc[r][q], valid - 8 * q);
}

// One tile over a dequantised chunk: whole panels up to 3 rows, else two halves.
void run_chunk(const Tile& tile, const float* buf, int64_t k0, int64_t kc, float* y, int64_t ldy, int64_t n_valid) {
  const float* xp = tile.xp + k0 * tile.mr;
  const bool resume = k0 > 0;
  switch (tile.mr) {
    case 1: kernel_f32<1, 4>(xp, buf, 0, kc, resume, y, ldy, n_valid); return;
    case 2: kernel_f32<2, 4>(xp, buf, 0, kc, resume, y, ldy, n_valid); return;
    case 3: kernel_f32<3, 4>(xp, buf, 0, kc, resume, y, ldy, n_valid); return;
    default: break;
  }
  for (int c0 = 0; c0 < kNR; c0 += 16) {
    switch (tile.mr) {
      case 4: kernel_f32<4, 2>(xp, buf, c0, kc, resume, y, ldy, n_valid); break;
      case 5: kernel_f32<5, 2>(xp, buf, c0, kc, resume, y, ldy, n_valid); break;
      default: kernel_f32<6, 2>(xp, buf, c0, kc, resume, y, ldy, n_valid); break;
    }
  }
}

template <int G, bool ASYM>
void run(const Tile* tiles, int ntiles, int64_t ldy, const PackedMatrix& w, int64_t p_begin, int64_t p_end) {
  const int64_t k = w.cols(), n = w.rows();
  const int64_t pb = panel_bytes(w.storage(), k);
  const auto* base = static_cast<const uint8_t*>(w.data());

  if (ntiles == 1 && tiles[0].mr == 1) {  // decode: one stream over the weights
    const Tile& tile = tiles[0];
    for (int64_t p = p_begin; p < p_end; ++p)
      kernel_row<G, ASYM>(tile.xp, base + p * pb, k, tile.y + p * kNR, n - p * kNR);
    return;
  }

  // Chunks of kChunk k of a panel, dequantised once for all tiles and both
  // halves; reading chunk c prefetches chunk c + 1 (at the end, the next
  // panel's first).
  alignas(32) float buf[kChunk * kNR];
  const int64_t ahead = G == 0 ? kChunk * kNR : kChunk / G * int4_block_bytes(w.storage());
  for (int64_t p = p_begin; p < p_end; ++p) {
    const uint8_t* panel = base + p * pb;
    for (int64_t k0 = 0; k0 < k; k0 += kChunk) {
      const int64_t k1 = std::min(k, k0 + kChunk);
      dequantize_chunk<G, ASYM>(panel, k0, k1, buf, ahead);
      for (int t = 0; t < ntiles; ++t) {
        const Tile& tile = tiles[t];
        assert(tile.mr <= kMaxChunkMR);
        run_chunk(tile, buf, k0, k1 - k0, tile.y + p * kNR, ldy, n - p * kNR);
      }
    }
  }
}

}  // namespace

void run_quant_panels_avx2(const Tile* tiles, int ntiles, int64_t ldy, const PackedMatrix& w, int64_t p_begin,
                           int64_t p_end) {
  switch (w.storage()) {
    case WeightType::kInt8:
    case WeightType::kInt8Outlier: run<0, false>(tiles, ntiles, ldy, w, p_begin, p_end); break;
    case WeightType::kInt4: run<32, false>(tiles, ntiles, ldy, w, p_begin, p_end); break;
    case WeightType::kInt4G64: run<64, false>(tiles, ntiles, ldy, w, p_begin, p_end); break;
    case WeightType::kInt4Asym: run<32, true>(tiles, ntiles, ldy, w, p_begin, p_end); break;
    case WeightType::kInt4AsymG64: run<64, true>(tiles, ntiles, ldy, w, p_begin, p_end); break;
    default: run_panels_scalar(tiles, ntiles, ldy, w, p_begin, p_end); break;  // not quantised: not dispatched here
  }
}

}  // namespace loragate::cpu::detail
