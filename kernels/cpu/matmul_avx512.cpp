// AVX-512 kernels. Each call computes an MR x (NP * 32) block of Y with
// 2 * MR * NP zmm accumulators, one per 16 outputs, walking k = 0..K-1 with
// one FMA per k: the same operation sequence as the scalar fallback, so
// results are bit-identical whatever the block shape.
//
// Parallelism comes from independent outputs, never from splitting K:
//  - M = 1..6 (decode): 2-4 panels at once = 8+ accumulator chains and as
//    many memory streams, software-prefetched; bandwidth bound.
//  - tiles of 7..14 rows: one panel, up to 28 accumulators; the panel stays
//    in L1/L2 while every M tile passes over it, and the next panel is
//    prefetched meanwhile.

// GCC 12's _mm512_slli_epi32 passes an "undefined" vector as a dummy source,
// which -Wmaybe-uninitialized flags inside the header; the value is unused.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "kernels/cpu/matmul_internal.h"

#define LG_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

namespace loragate::cpu::detail {
namespace {

// Panels streamed together by a tile of `mr` rows (see the file comment).
// Tiles of 7+ rows take one panel, so a batch of several tiles (M > 14)
// always walks the weights one panel at a time.
constexpr int panels_for(int mr) { return mr <= 2 ? 4 : mr <= 6 ? 2 : 1; }

// Software prefetch for a kernel call. `ahead`: bytes ahead within each of
// the NP weight streams (0 = off). `next`: a region of the *next* panel to
// pull into L2 while this one is computed (nullptr = off), cut into
// kNextParts parts of `next_part` bytes that are walked round-robin, each at
// `next_step` bytes per visit (16.16 fixed point, at most 128 B). Several
// concurrent sequential streams let the L2 hardware prefetcher keep more
// lines in flight than one stream would.
constexpr int64_t kNextParts = 4;
struct Prefetch {
  int64_t ahead = 0;
  const uint8_t* next = nullptr;
  int64_t next_part = 0;
  int64_t next_step = 0;
};

using KernelFn = void (*)(const float* xp, const uint8_t* w, int64_t panel_bytes, int64_t k, float* y,
                          int64_t ldy, int64_t n_valid, const Prefetch& pf);

template <int MR, int NP, bool BF16>
LG_AVX512 void kernel(const float* xp, const uint8_t* w, int64_t panel_bytes, int64_t k, float* y, int64_t ldy,
                      int64_t n_valid, const Prefetch& pf) {
  constexpr int64_t kStep = BF16 ? 64 : 128;  // bytes of one k-slice of a panel
  __m512 acc[MR][NP][2];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) acc[r][p][0] = acc[r][p][1] = _mm512_setzero_ps();

  const __m512i hi_mask = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  const int64_t ahead = pf.ahead, next_step = pf.next_step;
  const uint8_t* next = pf.next;
  const int64_t next_part = pf.next_part;
  for (int64_t i = 0; i < k; ++i) {
    if (next != nullptr) {
      // Round-robin over kNextParts sub-streams (see Prefetch).
      const char* a = reinterpret_cast<const char*>(next + (i % kNextParts) * next_part +
                                                    (((i / kNextParts) * next_step) >> 16));
      _mm_prefetch(a, _MM_HINT_T1);
      if (next_step > (int64_t{64} << 16)) _mm_prefetch(a + 64, _MM_HINT_T1);  // up to 128 B per k
    }
    __m512 w0[NP], w1[NP];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      const uint8_t* wp = w + p * panel_bytes;
      if constexpr (BF16) {
        // Exact widening: bf16 bits are the top half of the f32 bits.
        const __m512i v = _mm512_load_si512(wp);
        w0[p] = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
        w1[p] = _mm512_castsi512_ps(_mm512_and_si512(v, hi_mask));
        if (ahead != 0) _mm_prefetch(reinterpret_cast<const char*>(wp + ahead), _MM_HINT_T0);
      } else {
        w0[p] = _mm512_load_ps(reinterpret_cast<const float*>(wp));
        w1[p] = _mm512_load_ps(reinterpret_cast<const float*>(wp + 64));
        if (ahead != 0) {
          _mm_prefetch(reinterpret_cast<const char*>(wp + ahead), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(wp + ahead + 64), _MM_HINT_T0);
        }
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 xb = _mm512_set1_ps(xp[r]);
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) {
        acc[r][p][0] = _mm512_fmadd_ps(xb, w0[p], acc[r][p][0]);
        acc[r][p][1] = _mm512_fmadd_ps(xb, w1[p], acc[r][p][1]);
      }
    }
    xp += MR;
    w += kStep;
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

// table[np][mr - 1]; only shapes that panels_for() can ask for are built.
template <int NP, bool BF16, int... I>
constexpr std::array<KernelFn, kMaxMR> make_row(std::integer_sequence<int, I...>) {
  return {(NP <= panels_for(I + 1) ? &kernel<I + 1, (NP <= panels_for(I + 1) ? NP : 1), BF16> : nullptr)...};
}

template <bool BF16>
struct Table {
  static constexpr auto seq = std::make_integer_sequence<int, kMaxMR>{};
  static constexpr std::array<std::array<KernelFn, kMaxMR>, 5> fn = {
      std::array<KernelFn, kMaxMR>{}, make_row<1, BF16>(seq), make_row<2, BF16>(seq),
      std::array<KernelFn, kMaxMR>{}, make_row<4, BF16>(seq)};
};

// Bytes in flight per thread that cover DRAM latency (~100 ns at a core's
// share of the bandwidth), split across the streams of one kernel call.
// Measured flat from 4 to 16 KB on a Sapphire Rapids VM; 2 KB was slower.
int64_t ahead_bytes(int np) { return 4096 / np; }

}  // namespace

void run_panels_avx512(const Tile* tiles, int ntiles, int64_t ldy, const PackedMatrix& w, int64_t p_begin,
                       int64_t p_end) {
  const bool bf16 = w.storage() == WeightType::kBF16;
  const int64_t k = w.cols(), n = w.rows();
  const int64_t panel_bytes = k * kNR * (bf16 ? 2 : 4);
  const auto& table = bf16 ? Table<true>::fn : Table<false>::fn;
  const auto* base = static_cast<const uint8_t*>(w.data());

  if (ntiles == 1 && panels_for(tiles[0].mr) > 1) {
    // Few rows (M <= 6), one pass over the weights: stream groups of panels,
    // prefetching ahead within each stream.
    const Tile& tile = tiles[0];
    const int group = panels_for(tile.mr);
    for (int64_t p = p_begin; p < p_end;) {
      int np = group;
      while (np > p_end - p) np /= 2;  // the tail: 3 panels run as 2 + 1
      Prefetch pf;
      pf.ahead = ahead_bytes(np);
      table[static_cast<size_t>(np)][static_cast<size_t>(tile.mr - 1)](
          tile.xp, base + p * panel_bytes, panel_bytes, k, tile.y + p * kNR, ldy, n - p * kNR, pf);
      p += np;
    }
    return;
  }

  // Tiles of 7+ rows, one panel per call. Each panel is read from memory
  // once (by tile 0) and from cache by later tiles. Tile t prefetches slice
  // t of the next panel into L2, so DRAM traffic for the next panel overlaps
  // this panel's arithmetic instead of stalling the next tile 0.
  const int64_t slice = panel_bytes / ntiles;
  for (int64_t p = p_begin; p < p_end; ++p) {
    for (int t = 0; t < ntiles; ++t) {
      const Tile& tile = tiles[t];
      Prefetch pf;
      if (p == p_begin && t == 0) pf.ahead = ahead_bytes(1);  // nothing prefetched this one
      if (p + 1 < p_end) {
        pf.next = base + (p + 1) * panel_bytes + t * slice;
        pf.next_part = slice / kNextParts;
        pf.next_step = (slice << 16) / k;
      }
      table[1][static_cast<size_t>(tile.mr - 1)](tile.xp, base + p * panel_bytes, panel_bytes, k,
                                                 tile.y + p * kNR, ldy, n - p * kNR, pf);
    }
  }
}

}  // namespace loragate::cpu::detail
