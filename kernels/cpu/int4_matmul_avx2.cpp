// AVX2 W4A8 kernel. Operation order: int4_matmul_internal.h.
//
// An int4 quad line (matmul_internal.h) is two ymm: the first holds rows
// 0..7 in its low nibbles and 16..23 in its high ones, the second rows 8..15
// and 24..31, each 32-bit lane one row's four k. vpmaddubsw takes the
// weights (u >= 0) as its unsigned operand and the broadcast activations as
// the signed one; its pair sums (at most 2 * 15 * 127) are added in int16
// over the block's 8 lines (at most 30480, no overflow) and widened to
// int32 by one vpmaddwd by ones per block. The int32 dots are exact, so
// tiles, blocking and threads never change a result.
//
// Tiles: 1 or 2 rows x 1 panel: 4 ymm of int16 block sums and 4 of f32
// totals per row, beside the line's 2 ymm and its 4 unpacked ones (two rows
// spill totals, which are touched once per block).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/int4_matmul_internal.h"

#define LG_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace loragate::cpu::detail {
namespace {

constexpr int kTileMR = 2;
constexpr int64_t panels_for(int /*mr*/) { return 1; }
constexpr int64_t kAhead = 1024;  // bytes ahead of the current line that the stream prefetches

template <int MR>
LG_AVX2 void tile(const Int4Batch& b, int64_t r0, const uint8_t* w, int64_t group, int64_t block_bytes,
                  bool asym, float* y, int64_t ldy, int n_last) {
  __m256 tot[MR][4];
#pragma GCC unroll 2
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int h = 0; h < 4; ++h) tot[r][h] = _mm256_setzero_ps();
  const __m256i low = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  const int64_t row_q = b.blocks * kActBlock, header = (asym ? 2 : 1) * kNR * 2;
  for (int64_t blk = 0; blk < b.blocks; ++blk) {
    const int64_t k0 = blk * kActBlock;
    const uint8_t* g = w + (k0 / group) * block_bytes;
    const uint8_t* lines = g + header + (k0 % group) / 4 * 64;
    __m256i dot[MR][4];
#pragma GCC unroll 2
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int h = 0; h < 4; ++h) dot[r][h] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const uint8_t* lp = lines + i * 64;
      _mm_prefetch(reinterpret_cast<const char*>(lp + kAhead), _MM_HINT_T0);
      const __m256i v0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(lp));
      const __m256i v1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(lp + 32));
      const __m256i u[4] = {_mm256_and_si256(v0, low), _mm256_and_si256(v1, low),
                            _mm256_and_si256(_mm256_srli_epi16(v0, 4), low),
                            _mm256_and_si256(_mm256_srli_epi16(v1, 4), low)};
#pragma GCC unroll 2
      for (int r = 0; r < MR; ++r) {
        int32_t quad;
        std::memcpy(&quad, b.q + (r0 + r) * row_q + k0 + 4 * i, 4);
        const __m256i xq = _mm256_set1_epi32(quad);
#pragma GCC unroll 4
        for (int h = 0; h < 4; ++h) dot[r][h] = _mm256_add_epi16(dot[r][h], _mm256_maddubs_epi16(u[h], xq));
      }
    }
    // The block's epilogue: t = fma(dot, s, min * sq), tot = fma(t, sx, tot).
    __m256 s[4], mn[4];
#pragma GCC unroll 4
    for (int h = 0; h < 4; ++h) {
      const auto* gp = reinterpret_cast<const __m128i*>(g) + h;
      s[h] = _mm256_cvtph_ps(_mm_load_si128(gp));
      mn[h] = asym ? _mm256_cvtph_ps(_mm_load_si128(gp + 4)) : _mm256_mul_ps(s[h], _mm256_set1_ps(-8.0f));
    }
#pragma GCC unroll 2
    for (int r = 0; r < MR; ++r) {
      const __m256 sx = _mm256_set1_ps(b.sx[(r0 + r) * b.blocks + blk]);
      const __m256 sq = _mm256_set1_ps(b.sq[(r0 + r) * b.blocks + blk]);
#pragma GCC unroll 4
      for (int h = 0; h < 4; ++h) {
        const __m256 d = _mm256_cvtepi32_ps(_mm256_madd_epi16(dot[r][h], ones));
        const __m256 term = _mm256_fmadd_ps(d, s[h], _mm256_mul_ps(mn[h], sq));
        tot[r][h] = _mm256_fmadd_ps(term, sx, tot[r][h]);
      }
    }
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
#pragma GCC unroll 2
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int h = 0; h < 4; ++h) {
      float* dst = y + r * ldy + 8 * h;
      const int valid = std::clamp(n_last - 8 * h, 0, 8);
      if (valid == 8) {
        _mm256_storeu_ps(dst, tot[r][h]);
      } else {
        _mm256_maskstore_ps(dst, _mm256_cmpgt_epi32(_mm256_set1_epi32(valid), lane), tot[r][h]);
      }
    }
}

}  // namespace

void int4_panels_avx2(const Int4Batch& b, const PackedMatrix& w, float* y, int64_t ldy, int64_t p_begin,
                      int64_t p_end) {
  const WeightType t = w.storage();
  const int64_t n = w.rows(), pb = panel_bytes(t, w.cols());
  const int64_t group = int4_group(t), block_bytes = int4_block_bytes(t);
  const bool asym = int4_asymmetric(t);
  const auto* base = static_cast<const uint8_t*>(w.data());
  for_each_int8_tile(b.m, kTileMR, panels_for, pb, p_begin, p_end, [&](int64_t r0, int mr, int64_t p, int /*np*/) {
    const int n_last = static_cast<int>(std::min<int64_t>(kNR, n - p * kNR));
    (mr == 1 ? tile<1> : tile<2>)(b, r0, base + p * pb, group, block_bytes, asym, y + r0 * ldy + p * kNR, ldy,
                                  n_last);
  });
}

}  // namespace loragate::cpu::detail
