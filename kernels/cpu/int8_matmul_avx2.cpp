// AVX2 int8-outlier kernel. Operation order: int8_matmul_internal.h.
//
// An int8 quad line (matmul_internal.h) is four ymm whose 32-bit lane j
// holds output 8h + j's four k; the four activations of the same k are
// broadcast to every lane. vpmaddubsw multiplies unsigned by signed bytes,
// so |q| goes in as the unsigned operand and vpsignb moves q's sign onto the
// weights (and zeroes them where q = 0, which adds nothing anyway);
// |q| * |w| <= 127 * 127, so its pair sums never saturate, and vpmaddwd by
// ones widens them to int32. The int32 dots are exact, so tiles, blocking
// and threads never change a result.
//
// Tiles: 1 row x 2 panels (decode: two streams in flight) or 2 rows x 1
// panel: 8 accumulators, the line's 4 ymm, a broadcast, its |q| and the
// ones fill the 16 ymm (3 rows spill accumulators on every step).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/cpu/int8_matmul_internal.h"

#define LG_AVX2 __attribute__((target("avx2,fma")))
#define LG_INLINE inline __attribute__((always_inline))

namespace loragate::cpu::detail {
namespace {

constexpr int kTileMR = 2;
constexpr int kTileNP = 2;
constexpr int64_t panels_for(int mr) { return mr == 1 ? 2 : 1; }
constexpr int64_t kAhead = 1024;  // bytes ahead of the current line that each stream prefetches

using TileFn = void (*)(const Int8Batch& b, int64_t r0, const uint8_t* w, int64_t pb, int64_t quads, float* y,
                        int64_t ldy, int n_last);

// The four activations of quad i of a row, in every lane.
LG_AVX2 LG_INLINE __m256i broadcast_quad(const int8_t* q, int64_t i) {
  int32_t v;
  std::memcpy(&v, q + 4 * i, 4);
  return _mm256_set1_epi32(v);
}

// The f32 part, as in the AVX-512 kernels: y = (float)dot * (sx * s_w), then
// one FMA per outlier k in increasing k with the dequantised weight.
template <int MR, int NP>
LG_AVX2 LG_INLINE void finish(const __m256i (&dot)[MR][NP][4], const Int8Batch& b, int64_t r0, const uint8_t* w,
                              int64_t pb, float* y, int64_t ldy, int n_last) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
#pragma GCC unroll 2
  for (int r = 0; r < MR; ++r) {
    const int64_t row = r0 + r;
    const __m256 sx = _mm256_set1_ps(b.sx[row]);
    __m256 acc[NP][4];
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p)
#pragma GCC unroll 4
      for (int h = 0; h < 4; ++h) {
        const __m256 sw = _mm256_load_ps(reinterpret_cast<const float*>(w + p * pb) + 8 * h);
        acc[p][h] = _mm256_mul_ps(_mm256_cvtepi32_ps(dot[r][p][h]), _mm256_mul_ps(sx, sw));
      }
    const float* x = b.x + row * b.ldx;
    for (int64_t o = b.begin[row]; o < b.begin[row + 1]; ++o) {
      const int32_t c = b.cols[o];
      const __m256 xv = _mm256_set1_ps(x[c]);
      const __m128i shift = _mm_cvtsi32_si128(24 - 8 * (c % 4));  // brings byte c % 4 of each lane to the top
      const uint8_t* line = w + kInt8ScaleBytes + (c / 4) * kNR * 4;
#pragma GCC unroll 2
      for (int p = 0; p < NP; ++p)
#pragma GCC unroll 4
        for (int h = 0; h < 4; ++h) {
          const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(line + p * pb + 32 * h));
          const __m256i wq = _mm256_srai_epi32(_mm256_sll_epi32(v, shift), 24);
          const __m256 sw = _mm256_load_ps(reinterpret_cast<const float*>(w + p * pb) + 8 * h);
          acc[p][h] = _mm256_fmadd_ps(xv, _mm256_mul_ps(_mm256_cvtepi32_ps(wq), sw), acc[p][h]);
        }
    }
    float* yr = y + r * ldy;
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p)
#pragma GCC unroll 4
      for (int h = 0; h < 4; ++h) {
        float* dst = yr + p * kNR + 8 * h;
        const int valid = p < NP - 1 ? 8 : std::clamp(n_last - 8 * h, 0, 8);
        if (valid == 8) {
          _mm256_storeu_ps(dst, acc[p][h]);
        } else {
          _mm256_maskstore_ps(dst, _mm256_cmpgt_epi32(_mm256_set1_epi32(valid), lane), acc[p][h]);
        }
      }
  }
}

template <int MR, int NP>
LG_AVX2 void tile(const Int8Batch& b, int64_t r0, const uint8_t* w, int64_t pb, int64_t quads, float* y,
                  int64_t ldy, int n_last) {
  __m256i acc[MR][NP][4];
#pragma GCC unroll 2
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p)
#pragma GCC unroll 4
      for (int h = 0; h < 4; ++h) acc[r][p][h] = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* q = b.q + r0 * b.q_stride;
  const uint8_t* line = w + kInt8ScaleBytes;
  for (int64_t i = 0; i < quads; ++i, line += kNR * 4) {
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) {
      _mm_prefetch(reinterpret_cast<const char*>(line + p * pb + kAhead), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(line + p * pb + 64 + kAhead), _MM_HINT_T0);
    }
#pragma GCC unroll 2
    for (int r = 0; r < MR; ++r) {
      const __m256i xq = broadcast_quad(q + r * b.q_stride, i);
      const __m256i xa = _mm256_abs_epi8(xq);
#pragma GCC unroll 2
      for (int p = 0; p < NP; ++p)
#pragma GCC unroll 4
        for (int h = 0; h < 4; ++h) {
          const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(line + p * pb + 32 * h));
          const __m256i prod = _mm256_maddubs_epi16(xa, _mm256_sign_epi8(v, xq));
          acc[r][p][h] = _mm256_add_epi32(acc[r][p][h], _mm256_madd_epi16(prod, ones));
        }
    }
  }
  finish<MR, NP>(acc, b, r0, w, pb, y, ldy, n_last);
}

// Tile functions by (mr - 1) * kTileNP + np - 1; only the shapes panels_for()
// asks for are instantiated.
template <int MR, int NP>
constexpr TileFn entry() {
  if constexpr (NP <= panels_for(MR)) return &tile<MR, NP>;
  return nullptr;
}
template <int... I>
constexpr std::array<TileFn, sizeof...(I)> make_table(std::integer_sequence<int, I...>) {
  return {entry<I / kTileNP + 1, I % kTileNP + 1>()...};
}
constexpr auto kTable = make_table(std::make_integer_sequence<int, kTileMR * kTileNP>());

}  // namespace

void int8_panels_avx2(const Int8Batch& b, const PackedMatrix& w, float* y, int64_t ldy, int64_t p_begin,
                      int64_t p_end) {
  const int64_t n = w.rows(), k = w.cols(), quads = int8_quads(k);
  const int64_t pb = panel_bytes(WeightType::kInt8Outlier, k);
  const auto* base = static_cast<const uint8_t*>(w.data());
  for_each_int8_tile(b.m, kTileMR, panels_for, pb, p_begin, p_end, [&](int64_t r0, int mr, int64_t p, int np) {
    const int n_last = static_cast<int>(std::min<int64_t>(kNR, n - (p + np - 1) * kNR));
    kTable[static_cast<size_t>((mr - 1) * kTileNP + np - 1)](b, r0, base + p * pb, pb, quads, y + r0 * ldy + p * kNR,
                                                            ldy, n_last);
  });
}

}  // namespace loragate::cpu::detail
