// AVX-512 int8-outlier kernels: VNNI (vpdpbusd) where the CPU has it, else
// AVX-512BW (vpmaddubsw + vpmaddwd). Operation order: int8_matmul_internal.h.
//
// An int8 quad line (matmul_internal.h) is two zmm whose 32-bit lane j holds
// output j's four k, which is what both instructions sum into one int32
// lane; the four activations of the same k are broadcast to every lane.
//  - VNNI multiplies unsigned by signed bytes: the activations go in as
//    u = q + 128 (q xor 0x80) and the kernel subtracts 128 * sum_k w, the
//    weights' sum, taken in the same pass by one more vpdpbusd on bytes of 1
//    (shared by the tile's rows). Outlier columns (q = 0) and the zero
//    padding of the last quad cancel out the same way. The int32 lanes may
//    wrap midway; the final value is the true dot, which fits.
//  - AVX-512BW has no vpsignb: |q| goes in as the unsigned operand and the
//    weights are negated (masked) where q < 0; |q| * |w| <= 127 * 127, so
//    the pair sums of vpmaddubsw never saturate, and vpmaddwd by ones widens
//    them to int32.
// The int32 dots are exact, so tiles, blocking and threads never change a
// result; the f32 epilogue (scale, outliers) is one code for both kernels.
//
// Tiles: mr rows x np panels, accumulators in registers (2 zmm per row and
// panel, plus 2 per panel for VNNI's weight sums): 1 row x 4 panels (decode:
// four streams in flight), then up to 5 rows x 2 panels and 12 rows x 1
// panel (VNNI), or 4 x 2 and 8 x 1 (AVX-512BW, whose steps need 4 more
// registers: taller tiles spill accumulators on every step).

// GCC 12's _mm512_slli_epi32 and _mm512_cvtepi32_ps pass an "undefined"
// vector as a dummy source, which -W(maybe-)uninitialized flags inside the
// header; the value is unused.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/cpu/int8_matmul_internal.h"

#define LG_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define LG_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,avx512vnni")))
#define LG_INLINE inline __attribute__((always_inline))

namespace loragate::cpu::detail {
namespace {

// The table of tile functions covers up to kTileMR rows x kTileNP panels.
constexpr int kTileMR = 12;
constexpr int kTileNP = 4;

// Bytes ahead of the current line that each stream prefetches.
constexpr int64_t kAhead = 1024;

using TileFn = void (*)(const Int8Batch& b, int64_t r0, const uint8_t* w, int64_t pb, int64_t quads, float* y,
                        int64_t ldy, int n_last);

// The four activations of quad i of a row, in every lane.
LG_AVX512 LG_INLINE __m512i broadcast_quad(const int8_t* q, int64_t i) {
  int32_t v;
  std::memcpy(&v, q + 4 * i, 4);
  return _mm512_set1_epi32(v);
}

// acc + the dot products of u's and w's byte quads (vpdpbusd). Through asm:
// GCC 12 does not tie the intrinsic's accumulator to a register, and then
// copies (and spills) every accumulator on every step.
LG_AVX512_VNNI LG_INLINE __m512i dpbusd(__m512i acc, __m512i u, __m512i w) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(w));
  return acc;
}

// The f32 part: y = (float)dot * (sx * s_w), then one FMA per outlier k in
// increasing k with the dequantised weight; rows r0.. of y, panels 0..NP-1
// from w (pb bytes apart), the last one holding n_last valid outputs.
template <int MR, int NP>
LG_AVX512 LG_INLINE void finish(const __m512i (&dot)[MR][NP][2], const Int8Batch& b, int64_t r0, const uint8_t* w,
                                int64_t pb, float* y, int64_t ldy, int n_last) {
  __m512 sw[NP][2];
#pragma GCC unroll 4
  for (int p = 0; p < NP; ++p) {
    const auto* scales = reinterpret_cast<const float*>(w + p * pb);
    sw[p][0] = _mm512_load_ps(scales);
    sw[p][1] = _mm512_load_ps(scales + 16);
  }
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r) {
    const int64_t row = r0 + r;
    const __m512 sx = _mm512_set1_ps(b.sx[row]);
    __m512 acc[NP][2];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p)
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        acc[p][h] = _mm512_mul_ps(_mm512_cvtepi32_ps(dot[r][p][h]), _mm512_mul_ps(sx, sw[p][h]));
      }
    const float* x = b.x + row * b.ldx;
    for (int64_t o = b.begin[row]; o < b.begin[row + 1]; ++o) {
      const int32_t c = b.cols[o];
      const __m512 xv = _mm512_set1_ps(x[c]);
      const __m128i shift = _mm_cvtsi32_si128(24 - 8 * (c % 4));  // brings byte c % 4 of each lane to the top
      const uint8_t* line = w + kInt8ScaleBytes + (c / 4) * kNR * 4;
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p)
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m512i v = _mm512_load_si512(line + p * pb + 64 * h);
          const __m512i wq = _mm512_srai_epi32(_mm512_sll_epi32(v, shift), 24);
          acc[p][h] = _mm512_fmadd_ps(xv, _mm512_mul_ps(_mm512_cvtepi32_ps(wq), sw[p][h]), acc[p][h]);
        }
    }
    float* yr = y + r * ldy;
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p)
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        float* dst = yr + p * kNR + 16 * h;
        const int valid = p < NP - 1 ? 16 : std::clamp(n_last - 16 * h, 0, 16);
        if (valid == 16) {
          _mm512_storeu_ps(dst, acc[p][h]);
        } else {
          _mm512_mask_storeu_ps(dst, static_cast<__mmask16>((1u << valid) - 1), acc[p][h]);
        }
      }
  }
}

template <int MR, int NP>
LG_AVX512_VNNI void vnni_tile(const Int8Batch& b, int64_t r0, const uint8_t* w, int64_t pb, int64_t quads,
                              float* y, int64_t ldy, int n_last) {
  __m512i acc[MR][NP][2], wsum[NP][2];
#pragma GCC unroll 4
  for (int p = 0; p < NP; ++p) {
    wsum[p][0] = wsum[p][1] = _mm512_setzero_si512();
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r) acc[r][p][0] = acc[r][p][1] = _mm512_setzero_si512();
  }
  const __m512i ones = _mm512_set1_epi8(1), flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const int8_t* q = b.q + r0 * b.q_stride;
  const uint8_t* line = w + kInt8ScaleBytes;
  for (int64_t i = 0; i < quads; ++i, line += kNR * 4) {
    __m512i v[NP][2];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      const uint8_t* lp = line + p * pb;
      _mm_prefetch(reinterpret_cast<const char*>(lp + kAhead), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(lp + 64 + kAhead), _MM_HINT_T0);
      v[p][0] = _mm512_load_si512(lp);
      v[p][1] = _mm512_load_si512(lp + 64);
      wsum[p][0] = dpbusd(wsum[p][0], ones, v[p][0]);
      wsum[p][1] = dpbusd(wsum[p][1], ones, v[p][1]);
    }
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r) {
      const __m512i u = _mm512_xor_si512(broadcast_quad(q + r * b.q_stride, i), flip);
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p)
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) acc[r][p][h] = dpbusd(acc[r][p][h], u, v[p][h]);
    }
  }
#pragma GCC unroll 4
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i bias = _mm512_slli_epi32(wsum[p][h], 7);
#pragma GCC unroll 12
      for (int r = 0; r < MR; ++r) acc[r][p][h] = _mm512_sub_epi32(acc[r][p][h], bias);
    }
  finish<MR, NP>(acc, b, r0, w, pb, y, ldy, n_last);
}

template <int MR, int NP>
LG_AVX512 void bw_tile(const Int8Batch& b, int64_t r0, const uint8_t* w, int64_t pb, int64_t quads, float* y,
                       int64_t ldy, int n_last) {
  __m512i acc[MR][NP][2];
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) acc[r][p][0] = acc[r][p][1] = _mm512_setzero_si512();
  const __m512i ones = _mm512_set1_epi16(1), zero = _mm512_setzero_si512();
  const int8_t* q = b.q + r0 * b.q_stride;
  const uint8_t* line = w + kInt8ScaleBytes;
  for (int64_t i = 0; i < quads; ++i, line += kNR * 4) {
    __m512i v[NP][2];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      const uint8_t* lp = line + p * pb;
      _mm_prefetch(reinterpret_cast<const char*>(lp + kAhead), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(lp + 64 + kAhead), _MM_HINT_T0);
      v[p][0] = _mm512_load_si512(lp);
      v[p][1] = _mm512_load_si512(lp + 64);
    }
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r) {
      const __m512i xq = broadcast_quad(q + r * b.q_stride, i);
      const __m512i xa = _mm512_abs_epi8(xq);
      const __mmask64 neg = _mm512_movepi8_mask(xq);
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p)
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m512i sw = _mm512_mask_sub_epi8(v[p][h], neg, zero, v[p][h]);
          acc[r][p][h] = _mm512_add_epi32(acc[r][p][h], _mm512_madd_epi16(_mm512_maddubs_epi16(xa, sw), ones));
        }
    }
  }
  finish<MR, NP>(acc, b, r0, w, pb, y, ldy, n_last);
}

// The two kernels' tile shapes, and their tile functions by
// (mr - 1) * kTileNP + np - 1 (only the shapes panels_for() asks for are
// instantiated).
struct Vnni {
  static constexpr int kMaxMR = 12;
  static constexpr int64_t panels_for(int mr) { return mr == 1 ? 4 : mr <= 5 ? 2 : 1; }
  template <int MR, int NP>
  static constexpr TileFn get() {
    if constexpr (NP <= panels_for(MR)) return &vnni_tile<MR, NP>;
    return nullptr;
  }
};
struct Bw {
  static constexpr int kMaxMR = 8;
  static constexpr int64_t panels_for(int mr) { return mr == 1 ? 4 : mr <= 4 ? 2 : 1; }
  template <int MR, int NP>
  static constexpr TileFn get() {
    if constexpr (MR <= kMaxMR && NP <= panels_for(MR)) return &bw_tile<MR, NP>;
    return nullptr;
  }
};
template <class K, int... I>
constexpr std::array<TileFn, sizeof...(I)> make_table(std::integer_sequence<int, I...>) {
  return {K::template get<I / kTileNP + 1, I % kTileNP + 1>()...};
}

template <class K>
void run(const Int8Batch& b, const PackedMatrix& w, float* y, int64_t ldy, int64_t p_begin, int64_t p_end) {
  static constexpr auto table = make_table<K>(std::make_integer_sequence<int, kTileMR * kTileNP>());
  const int64_t n = w.rows(), k = w.cols(), quads = int8_quads(k);
  const int64_t pb = panel_bytes(WeightType::kInt8Outlier, k);
  const auto* base = static_cast<const uint8_t*>(w.data());
  for_each_int8_tile(b.m, K::kMaxMR, K::panels_for, pb, p_begin, p_end, [&](int64_t r0, int mr, int64_t p, int np) {
    const int n_last = static_cast<int>(std::min<int64_t>(kNR, n - (p + np - 1) * kNR));
    table[static_cast<size_t>((mr - 1) * kTileNP + np - 1)](b, r0, base + p * pb, pb, quads, y + r0 * ldy + p * kNR,
                                                            ldy, n_last);
  });
}

}  // namespace

void int8_panels_avx512vnni(const Int8Batch& b, const PackedMatrix& w, float* y, int64_t ldy, int64_t p_begin,
                            int64_t p_end) {
  run<Vnni>(b, w, y, ldy, p_begin, p_end);
}

void int8_panels_avx512bw(const Int8Batch& b, const PackedMatrix& w, float* y, int64_t ldy, int64_t p_begin,
                          int64_t p_end) {
  run<Bw>(b, w, y, ldy, p_begin, p_end);
}

}  // namespace loragate::cpu::detail
