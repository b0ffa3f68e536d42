// AVX-512 kernels for int8 / int4 panels (layout in matmul_internal.h).
//
// Weights are dequantised exactly as dequantize() does it
// (int8: (float)q * scale; int4: fma((float)u, s, min)) and then used like
// f32 weights: one accumulator per 16 outputs, one FMA per k, k in order, so
// results equal the scalar reference bit for bit whatever the shape.
//
// Shapes:
//  - a lone tile of 1..8 rows (decode, small batches): the streaming kernel
//    dequantises in registers, 4 panels (1 row), 2 (2-3 rows) or 1 at once,
//    each a stream prefetched ahead; bound by memory or by the widening,
//    which is done once anyway. (Beyond 8 rows the accumulators, scales and
//    broadcasts no longer fit 32 zmm.)
//  - taller tiles, or several (prefill, batched decode): dequantising in
//    registers would repeat the widening for every tile and leave too few
//    registers for a tall one, so each chunk of 256 k of a panel is
//    dequantised once into an L1 buffer of f32, and every tile runs the f32
//    register-blocked kernel over it (up to 14 rows, 28 accumulators), its
//    partial sums kept in y between chunks (exact: a store and a reload).
//
// The widening, per 16 rows: int8 quad lines hold one row's four k per
// 32-bit lane, so k-th byte = srai(slli(lane, 24 - 8k), 24); int4 pair lines
// hold one byte per row, zero-extended to a lane, whose nibbles index a
// table of the floats 0..15 (vpermps reads only the low 4 bits of an index,
// so the low nibble needs no mask: one op instead of and + convert).

// GCC 12's _mm512_slli_epi32 passes an "undefined" vector as a dummy source,
// which -Wmaybe-uninitialized flags inside the header; the value is unused.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cstdint>
#include <utility>

#include "kernels/cpu/matmul_internal.h"

#define LG_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define LG_INLINE inline __attribute__((always_inline))

namespace loragate::cpu::detail {
namespace {

// Tallest lone tile the streaming kernel takes, and the panels it streams
// together for a tile of mr rows.
constexpr int kMaxStreamMR = 8;
constexpr int panels_for(int mr) { return mr == 1 ? 4 : mr <= 3 ? 2 : 1; }

// k per dequantised chunk: 32 KB of f32 weights, which stay in L1 while
// every tile passes over them.
constexpr int64_t kChunk = 256;

LG_AVX512 LG_INLINE void prefetch_ahead(const uint8_t* p, int64_t ahead) {
  _mm_prefetch(reinterpret_cast<const char*>(p + ahead), _MM_HINT_T0);
}

// acc[r][p][h] += x[r] * wv for every row r of the tile.
template <int MR, int NP>
LG_AVX512 LG_INLINE void accumulate(__m512 (&acc)[MR][NP][2], int p, int h, const float* x, __m512 wv) {
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) acc[r][p][h] = _mm512_fmadd_ps(_mm512_set1_ps(x[r]), wv, acc[r][p][h]);
}

// k-th (0..3) int8 weight of each lane's quad, dequantised.
template <int KK>
LG_AVX512 LG_INLINE __m512 int8_weights(__m512i v, __m512 scale) {
  const __m512i q = KK == 3 ? _mm512_srai_epi32(v, 24) : _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * KK), 24);
  return _mm512_mul_ps(_mm512_cvtepi32_ps(q), scale);
}

// k-th (0..3) k of a quad line of every panel into every row.
template <int KK, int MR, int NP>
LG_AVX512 LG_INLINE void int8_step(__m512 (&acc)[MR][NP][2], const __m512i (&v)[NP][2], const __m512 (&sc)[NP][2],
                                   const float* x) {
#pragma GCC unroll 4
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) accumulate<MR, NP>(acc, p, h, x, int8_weights<KK>(v[p][h], sc[p][h]));
}

// Row j's byte of a pair line (rows 0..15 from b) in lane j.
LG_AVX512 LG_INLINE __m512i int4_bytes(const uint8_t* b) {
  return _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(b)));
}

// The weights of the nibbles in the low 4 bits of each lane (the bits vpermps reads).
LG_AVX512 LG_INLINE __m512 int4_weights(__m512i nibble, __m512 s, __m512 m, __m512 table) {
  return _mm512_fmadd_ps(_mm512_permutexvar_ps(nibble, table), s, m);
}

// One pair line (PAIR) or only its first k (the odd end of K) of every
// panel: 16 bytes per half, byte j = row j's two nibbles. Several panels
// (few rows) go panel by panel, sharing the broadcasts of x; one panel (up
// to 8 rows) goes k by k, so only one k's broadcasts are live.
template <int MR, int NP, bool PAIR>
LG_AVX512 LG_INLINE void int4_line(__m512 (&acc)[MR][NP][2], const uint8_t* line, int64_t panel_bytes,
                                   const float* x, const __m512 (&s)[NP][2], const __m512 (&m)[NP][2],
                                   __m512 table) {
  if constexpr (NP == 1) {
    const __m512i u[2] = {int4_bytes(line), int4_bytes(line + 16)};
    accumulate<MR, NP>(acc, 0, 0, x, int4_weights(u[0], s[0][0], m[0][0], table));
    accumulate<MR, NP>(acc, 0, 1, x, int4_weights(u[1], s[0][1], m[0][1], table));
    if constexpr (PAIR) {
      accumulate<MR, NP>(acc, 0, 0, x + MR, int4_weights(_mm512_srli_epi32(u[0], 4), s[0][0], m[0][0], table));
      accumulate<MR, NP>(acc, 0, 1, x + MR, int4_weights(_mm512_srli_epi32(u[1], 4), s[0][1], m[0][1], table));
    }
  } else {
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m512i u = int4_bytes(line + p * panel_bytes + 16 * h);
        accumulate<MR, NP>(acc, p, h, x, int4_weights(u, s[p][h], m[p][h], table));
        if constexpr (PAIR)
          accumulate<MR, NP>(acc, p, h, x + MR, int4_weights(_mm512_srli_epi32(u, 4), s[p][h], m[p][h], table));
      }
    }
  }
}

using KernelFn = void (*)(const float* xp, const uint8_t* w, int64_t panel_bytes, int64_t k, float* y,
                          int64_t ldy, int64_t n_valid, int64_t ahead);

// MR rows x NP panels. G: int4 group (0 = int8); ASYM: stored minimums.
template <int MR, int NP, int G, bool ASYM>
LG_AVX512 void kernel(const float* xp, const uint8_t* w, int64_t panel_bytes, int64_t k, float* y, int64_t ldy,
                      int64_t n_valid, int64_t ahead) {
  __m512 acc[MR][NP][2];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) acc[r][p][0] = acc[r][p][1] = _mm512_setzero_ps();

  if constexpr (G == 0) {
    __m512 sc[NP][2];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      const auto* s = reinterpret_cast<const float*>(w + p * panel_bytes);
      sc[p][0] = _mm512_load_ps(s);
      sc[p][1] = _mm512_load_ps(s + 16);
    }
    const uint8_t* line = w + kInt8ScaleBytes;
    const int64_t quads = k / 4;
    for (int64_t q = 0; q < quads; ++q) {
      __m512i v[NP][2];
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) {
        const uint8_t* lp = line + p * panel_bytes;
        prefetch_ahead(lp, ahead);
        prefetch_ahead(lp + 64, ahead);
        v[p][0] = _mm512_load_si512(lp);
        v[p][1] = _mm512_load_si512(lp + 64);
      }
      // k by k, so only one k's broadcasts are live.
      int8_step<0, MR, NP>(acc, v, sc, xp);
      int8_step<1, MR, NP>(acc, v, sc, xp + MR);
      int8_step<2, MR, NP>(acc, v, sc, xp + 2 * MR);
      int8_step<3, MR, NP>(acc, v, sc, xp + 3 * MR);
      xp += 4 * MR;
      line += kNR * 4;
    }
    if (const int64_t rem = k % 4; rem != 0) {  // the last, partial quad: x stops at K
      __m512i v[NP][2];
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) {
        v[p][0] = _mm512_load_si512(line + p * panel_bytes);
        v[p][1] = _mm512_load_si512(line + p * panel_bytes + 64);
      }
      int8_step<0, MR, NP>(acc, v, sc, xp);
      if (rem > 1) int8_step<1, MR, NP>(acc, v, sc, xp + MR);
      if (rem > 2) int8_step<2, MR, NP>(acc, v, sc, xp + 2 * MR);
    }
  } else {
    constexpr int64_t kHeader = (ASYM ? 2 : 1) * kNR * 2;
    constexpr int64_t kBlock = kHeader + kNR / 2 * G;
    const __m512 table = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 minus8 = _mm512_set1_ps(-8.0f);
    for (int64_t g0 = 0; g0 < k; g0 += G, w += kBlock) {
      __m512 s[NP][2], m[NP][2];
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) {
        const uint8_t* b = w + p * panel_bytes;
        prefetch_ahead(b, ahead);
        if constexpr (ASYM) prefetch_ahead(b + 64, ahead);
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          s[p][h] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(b + 32 * h)));
          m[p][h] = ASYM ? _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(b + 64 + 32 * h)))
                         : _mm512_mul_ps(s[p][h], minus8);
        }
      }
      const int64_t len = std::min<int64_t>(G, k - g0), pairs = len / 2;
      const uint8_t* line = w + kHeader;
      // Two pairs (one cache line per panel) per iteration.
      for (int64_t j = 0; j + 2 <= pairs; j += 2) {
#pragma GCC unroll 4
        for (int p = 0; p < NP; ++p) prefetch_ahead(line + p * panel_bytes, ahead);
        int4_line<MR, NP, true>(acc, line, panel_bytes, xp, s, m, table);
        int4_line<MR, NP, true>(acc, line + kNR, panel_bytes, xp + 2 * MR, s, m, table);
        line += 2 * kNR;
        xp += 4 * MR;
      }
      if (pairs % 2 != 0) {
        int4_line<MR, NP, true>(acc, line, panel_bytes, xp, s, m, table);
        line += kNR;
        xp += 2 * MR;
      }
      if (len % 2 != 0) {  // odd K: the last pair has only its first k
        int4_line<MR, NP, false>(acc, line, panel_bytes, xp, s, m, table);
        xp += MR;
      }
    }
  }

  // Columns past n_valid belong to the zero padding (or the next thread).
#pragma GCC unroll 4
  for (int p = 0; p < NP; ++p) {
    const int64_t valid = n_valid - p * kNR;
    const __mmask16 m0 = valid >= 16 ? 0xffff : valid <= 0 ? 0 : static_cast<__mmask16>((1u << valid) - 1);
    const __mmask16 m1 = valid >= 32 ? 0xffff : valid <= 16 ? 0 : static_cast<__mmask16>((1u << (valid - 16)) - 1);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      float* yr = y + r * ldy + p * kNR;
      _mm512_mask_storeu_ps(yr, m0, acc[r][p][0]);
      _mm512_mask_storeu_ps(yr + 16, m1, acc[r][p][1]);
    }
  }
}

// Dequantises k = k0..k1-1 of a panel into buf, 32 floats per k in column
// order: the weights kernel_f32 reads. Prefetches `ahead` bytes ahead in the
// panel's stream (into L2: the buffer and x fill L1).
template <int G, bool ASYM>
LG_AVX512 void dequantize_chunk(const uint8_t* panel, int64_t k0, int64_t k1, float* buf, int64_t ahead) {
  if constexpr (G == 0) {
    const auto* scales = reinterpret_cast<const float*>(panel);
    const __m512 sc[2] = {_mm512_load_ps(scales), _mm512_load_ps(scales + 16)};
    const uint8_t* line = panel + kInt8ScaleBytes + k0 / 4 * kNR * 4;
    for (int64_t c = k0; c < k1; c += 4, line += kNR * 4, buf += 4 * kNR) {
      _mm_prefetch(reinterpret_cast<const char*>(line + ahead), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(line + ahead + 64), _MM_HINT_T1);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m512i v = _mm512_load_si512(line + 64 * h);
        // Lanes past K are written but never read (kernel_f32 stops at k1).
        _mm512_store_ps(buf + 16 * h, int8_weights<0>(v, sc[h]));
        _mm512_store_ps(buf + kNR + 16 * h, int8_weights<1>(v, sc[h]));
        _mm512_store_ps(buf + 2 * kNR + 16 * h, int8_weights<2>(v, sc[h]));
        _mm512_store_ps(buf + 3 * kNR + 16 * h, int8_weights<3>(v, sc[h]));
      }
    }
  } else {
    constexpr int64_t kHeader = (ASYM ? 2 : 1) * kNR * 2;
    constexpr int64_t kBlock = kHeader + kNR / 2 * G;
    const __m512 table = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 minus8 = _mm512_set1_ps(-8.0f);
    const uint8_t* b = panel + k0 / G * kBlock;
    for (int64_t g0 = k0; g0 < k1; g0 += G, b += kBlock) {
      __m512 s[2], m[2];
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        s[h] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(b + 32 * h)));
        m[h] = ASYM ? _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(b + 64 + 32 * h)))
                    : _mm512_mul_ps(s[h], minus8);
      }
      // Whole lines (two pairs); a pair's second k past K is zero, never read.
      const uint8_t* line = b + kHeader;
      const int64_t pairs = (std::min<int64_t>(G, k1 - g0) + 1) / 2;
      for (int64_t j = 0; j < pairs; ++j, line += kNR, buf += 2 * kNR) {
        if (j % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(line + ahead), _MM_HINT_T1);
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m512i u = int4_bytes(line + 16 * h);
          _mm512_store_ps(buf + 16 * h, int4_weights(u, s[h], m[h], table));
          _mm512_store_ps(buf + kNR + 16 * h, int4_weights(_mm512_srli_epi32(u, 4), s[h], m[h], table));
        }
      }
    }
  }
}

// MR rows x one panel over `kc` dequantised k (buf), as the f32 kernel does
// it. The accumulators start at 0 (first chunk) or resume from the partial
// sums the previous chunk left in y: a store and a reload are exact.
template <int MR>
LG_AVX512 void kernel_f32(const float* xp, const float* buf, int64_t kc, bool resume, float* y, int64_t ldy,
                          int64_t n_valid) {
  const __mmask16 m0 = n_valid >= 16 ? 0xffff : static_cast<__mmask16>((1u << n_valid) - 1);
  const __mmask16 m1 = n_valid >= 32 ? 0xffff : n_valid <= 16 ? 0 : static_cast<__mmask16>((1u << (n_valid - 16)) - 1);
  __m512 acc[MR][2];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    if (resume) {
      acc[r][0] = _mm512_maskz_loadu_ps(m0, y + r * ldy);
      acc[r][1] = _mm512_maskz_loadu_ps(m1, y + r * ldy + 16);
    } else {
      acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    }
  }
  for (int64_t i = 0; i < kc; ++i) {
    const __m512 w0 = _mm512_load_ps(buf), w1 = _mm512_load_ps(buf + 16);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 xb = _mm512_set1_ps(xp[r]);
      acc[r][0] = _mm512_fmadd_ps(xb, w0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(xb, w1, acc[r][1]);
    }
    xp += MR;
    buf += kNR;
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    _mm512_mask_storeu_ps(y + r * ldy, m0, acc[r][0]);
    _mm512_mask_storeu_ps(y + r * ldy + 16, m1, acc[r][1]);
  }
}

using ChunkFn = void (*)(const float* xp, const float* buf, int64_t kc, bool resume, float* y, int64_t ldy,
                         int64_t n_valid);
template <int... I>
constexpr std::array<ChunkFn, kMaxMR> make_chunk_table(std::integer_sequence<int, I...>) {
  return {&kernel_f32<I + 1>...};
}
constexpr auto kChunkTable = make_chunk_table(std::make_integer_sequence<int, kMaxMR>{});

// Streaming kernels, table[np][mr - 1]; only shapes that panels_for() asks for are built.
template <int NP, int G, bool ASYM, int... I>
constexpr std::array<KernelFn, kMaxStreamMR> make_row(std::integer_sequence<int, I...>) {
  return {(NP <= panels_for(I + 1) ? &kernel<I + 1, (NP <= panels_for(I + 1) ? NP : 1), G, ASYM> : nullptr)...};
}

template <int G, bool ASYM>
struct Table {
  static constexpr auto seq = std::make_integer_sequence<int, kMaxStreamMR>{};
  static constexpr std::array<std::array<KernelFn, kMaxStreamMR>, 5> fn = {
      std::array<KernelFn, kMaxStreamMR>{}, make_row<1, G, ASYM>(seq), make_row<2, G, ASYM>(seq),
      std::array<KernelFn, kMaxStreamMR>{}, make_row<4, G, ASYM>(seq)};
};

// Bytes in flight per thread to cover DRAM latency, split across the streams.
int64_t ahead_bytes(int np) { return 8192 / np; }

template <int G, bool ASYM>
void run(const Tile* tiles, int ntiles, int64_t ldy, const PackedMatrix& w, int64_t p_begin, int64_t p_end) {
  const int64_t k = w.cols(), n = w.rows();
  const int64_t pb = panel_bytes(w.storage(), k);
  const auto* base = static_cast<const uint8_t*>(w.data());

  if (ntiles == 1 && tiles[0].mr <= kMaxStreamMR) {
    // A lone tile of up to 8 rows, one pass over the weights: groups of
    // panels, each a stream prefetched ahead.
    const Tile& tile = tiles[0];
    for (int64_t p = p_begin; p < p_end;) {
      int np = panels_for(tile.mr);
      while (np > p_end - p) np /= 2;  // the tail: 3 panels run as 2 + 1
      const KernelFn fn = Table<G, ASYM>::fn[static_cast<size_t>(np)][static_cast<size_t>(tile.mr - 1)];
      fn(tile.xp, base + p * pb, pb, k, tile.y + p * kNR, ldy, n - p * kNR, ahead_bytes(np));
      p += np;
    }
    return;
  }

  // Chunks of kChunk k of a panel, dequantised once for all tiles; reading
  // chunk c prefetches chunk c + 1 (the next panel's first, at the end).
  alignas(64) float buf[kChunk * kNR];
  const int64_t ahead = G == 0 ? kChunk * kNR : kChunk / G * int4_block_bytes(w.storage());
  for (int64_t p = p_begin; p < p_end; ++p) {
    const uint8_t* panel = base + p * pb;
    for (int64_t k0 = 0; k0 < k; k0 += kChunk) {
      const int64_t k1 = std::min(k, k0 + kChunk);
      dequantize_chunk<G, ASYM>(panel, k0, k1, buf, ahead);
      for (int t = 0; t < ntiles; ++t) {
        const Tile& tile = tiles[t];
        assert(tile.mr <= kMaxMR);
        kChunkTable[static_cast<size_t>(tile.mr - 1)](tile.xp + k0 * tile.mr, buf, k1 - k0, k0 > 0,
                                                      tile.y + p * kNR, ldy, n - p * kNR);
      }
    }
  }
}

}  // namespace

void run_quant_panels_avx512(const Tile* tiles, int ntiles, int64_t ldy, const PackedMatrix& w, int64_t p_begin,
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
