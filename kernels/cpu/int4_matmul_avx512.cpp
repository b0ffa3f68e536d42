// AVX-512 W4A8 kernels: VNNI (vpdpbusd) where the CPU has it, else
// AVX-512BW (vpmaddubsw). Operation order: int4_matmul_internal.h.
//
// An int4 quad line (matmul_internal.h) is one zmm whose byte 4j + c holds
// row j's u at k = 4i + c in its low nibble and row 16 + j's in its high
// nibble. Masking the low nibbles gives rows 0..15 in the dot-product layout
// (a 32-bit lane = one row's four k); the four activations of the same k are
// broadcast to every lane. Both instructions take the weights (u >= 0) as
// the unsigned operand and the activations as the signed one.
//  - VNNI: the high nibbles are only masked (16 u), and the block's int32
//    sum is shifted right by 4 once at the block's end: one op per line
//    less than shifting every line.
//  - AVX-512BW: vpmaddubsw's pair sums (at most 2 * 15 * 127) are added in
//    int16 over the block's 8 lines (at most 30480, no overflow), then
//    widened by one vpmaddwd by ones per block.
// The int32 dots are exact, so tiles, blocking and threads never change a
// result; the f32 epilogue is one code for both.
//
// Tiles: mr rows x np panels (2 zmm of block sums and 2 of f32 totals per
// row and panel): 1 row x 4 panels (decode: four streams in flight), up to
// 3 rows x 2 panels, up to 6 rows x 1 panel.

// GCC 12's _mm512_cvtepi32_ps and friends pass an "undefined" vector as a
// dummy source, which -W(maybe-)uninitialized flags inside the header.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/cpu/int4_matmul_internal.h"

#define LG_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define LG_INLINE inline __attribute__((always_inline))

namespace loragate::cpu::detail {
namespace {

constexpr int kTileMR = 6;
constexpr int kTileNP = 4;
constexpr int64_t panels_for(int mr) { return mr == 1 ? 4 : mr <= 3 ? 2 : 1; }
constexpr int64_t kAhead = 1024;  // bytes ahead of the current line that each stream prefetches

// Where a panel's int4 groups lie.
struct Int4Layout {
  int64_t group;        // k per group (32 or 64)
  int64_t block_bytes;  // bytes per group
  int64_t header;       // scale (and minimum) bytes at the start of a group
  bool asym;
};

using TileFn = void (*)(const Int4Batch& b, int64_t r0, const uint8_t* w, int64_t pb, const Int4Layout& l,
                        float* y, int64_t ldy, int n_last);

// The four activations of quad i of a block, in every lane.
LG_AVX512 LG_INLINE __m512i broadcast_quad(const int8_t* q) {
  int32_t v;
  std::memcpy(&v, q, 4);
  return _mm512_set1_epi32(v);
}

// acc + the dot products of u's and w's byte quads (vpdpbusd). Through asm:
// GCC 12 does not tie the intrinsic's accumulator to a register, and then
// copies (and spills) every accumulator on every step. The asm needs no VNNI
// target either, so both kernels compile for plain AVX-512 and the compiler
// never emits a VNNI instruction into the AVX-512BW one.
LG_AVX512 LG_INLINE __m512i dpbusd(__m512i acc, __m512i u, __m512i w) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(w));
  return acc;
}

template <bool kVnni, int MR, int NP>
LG_AVX512 void tile(const Int4Batch& b, int64_t r0, const uint8_t* w, int64_t pb, const Int4Layout& l,
                         float* y, int64_t ldy, int n_last) {
  __m512 tot[MR][NP][2];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) tot[r][p][0] = tot[r][p][1] = _mm512_setzero_ps();
  const __m512i low = _mm512_set1_epi8(0x0F), high = _mm512_set1_epi8(static_cast<char>(0xF0));
  const __m512i ones = _mm512_set1_epi16(1);
  const int64_t row_q = b.blocks * kActBlock;
  for (int64_t blk = 0; blk < b.blocks; ++blk) {
    const int64_t k0 = blk * kActBlock;
    const uint8_t* g = w + (k0 / l.group) * l.block_bytes;
    const uint8_t* lines = g + l.header + (k0 % l.group) / 4 * 64;
    __m512i dot[MR][NP][2];
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) dot[r][p][0] = dot[r][p][1] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      __m512i u[NP][2];
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) {
        const uint8_t* lp = lines + p * pb + i * 64;
        _mm_prefetch(reinterpret_cast<const char*>(lp + kAhead), _MM_HINT_T0);
        const __m512i v = _mm512_load_si512(lp);
        u[p][0] = _mm512_and_si512(v, low);
        u[p][1] = kVnni ? _mm512_and_si512(v, high) : _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
      }
#pragma GCC unroll 6
      for (int r = 0; r < MR; ++r) {
        const __m512i xq = broadcast_quad(b.q + (r0 + r) * row_q + k0 + 4 * i);
#pragma GCC unroll 4
        for (int p = 0; p < NP; ++p)
#pragma GCC unroll 2
          for (int h = 0; h < 2; ++h) {
            if constexpr (kVnni) {
              dot[r][p][h] = dpbusd(dot[r][p][h], u[p][h], xq);
            } else {
              dot[r][p][h] = _mm512_add_epi16(dot[r][p][h], _mm512_maddubs_epi16(u[p][h], xq));
            }
          }
      }
    }
    // The block's epilogue: t = fma(dot, s, min * sq), tot = fma(t, sx, tot).
    __m512 s[NP][2], mn[NP][2];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p)
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const auto* gp = reinterpret_cast<const __m256i*>(g + p * pb) + h;
        s[p][h] = _mm512_cvtph_ps(_mm256_load_si256(gp));
        mn[p][h] = l.asym ? _mm512_cvtph_ps(_mm256_load_si256(gp + 2)) : _mm512_mul_ps(s[p][h], _mm512_set1_ps(-8.0f));
      }
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m512 sx = _mm512_set1_ps(b.sx[(r0 + r) * b.blocks + blk]);
      const __m512 sq = _mm512_set1_ps(b.sq[(r0 + r) * b.blocks + blk]);
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p)
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          __m512i d = dot[r][p][h];
          if constexpr (kVnni) {
            if (h == 1) d = _mm512_srai_epi32(d, 4);  // the high nibbles were 16 u
          } else {
            d = _mm512_madd_epi16(d, ones);
          }
          const __m512 term = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), s[p][h], _mm512_mul_ps(mn[p][h], sq));
          tot[r][p][h] = _mm512_fmadd_ps(term, sx, tot[r][p][h]);
        }
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    float* yr = y + r * ldy;
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p)
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        float* dst = yr + p * kNR + 16 * h;
        const int valid = p < NP - 1 ? 16 : std::clamp(n_last - 16 * h, 0, 16);
        if (valid == 16) {
          _mm512_storeu_ps(dst, tot[r][p][h]);
        } else {
          _mm512_mask_storeu_ps(dst, static_cast<__mmask16>((1u << valid) - 1), tot[r][p][h]);
        }
      }
  }
}

// Tile functions by (mr - 1) * kTileNP + np - 1; only the shapes panels_for()
// asks for are instantiated.
template <bool kVnni, int MR, int NP>
constexpr TileFn entry() {
  if constexpr (NP <= panels_for(MR)) return &tile<kVnni, MR, NP>;
  return nullptr;
}
template <bool kVnni, int... I>
constexpr std::array<TileFn, sizeof...(I)> make_table(std::integer_sequence<int, I...>) {
  return {entry<kVnni, I / kTileNP + 1, I % kTileNP + 1>()...};
}

template <bool kVnni>
void run(const Int4Batch& b, const PackedMatrix& w, float* y, int64_t ldy, int64_t p_begin, int64_t p_end) {
  static constexpr auto table = make_table<kVnni>(std::make_integer_sequence<int, kTileMR * kTileNP>());
  const WeightType t = w.storage();
  const int64_t n = w.rows(), pb = panel_bytes(t, w.cols());
  const Int4Layout layout{int4_group(t), int4_block_bytes(t), (int4_asymmetric(t) ? 2 : 1) * kNR * 2,
                          int4_asymmetric(t)};
  const auto* base = static_cast<const uint8_t*>(w.data());
  for_each_int8_tile(b.m, kTileMR, panels_for, pb, p_begin, p_end, [&](int64_t r0, int mr, int64_t p, int np) {
    const int n_last = static_cast<int>(std::min<int64_t>(kNR, n - (p + np - 1) * kNR));
    table[static_cast<size_t>((mr - 1) * kTileNP + np - 1)](b, r0, base + p * pb, pb, layout,
                                                            y + r0 * ldy + p * kNR, ldy, n_last);
  });
}

}  // namespace

void int4_panels_avx512vnni(const Int4Batch& b, const PackedMatrix& w, float* y, int64_t ldy, int64_t p_begin,
                            int64_t p_end) {
  run<true>(b, w, y, ldy, p_begin, p_end);
}

void int4_panels_avx512bw(const Int4Batch& b, const PackedMatrix& w, float* y, int64_t ldy, int64_t p_begin,
                          int64_t p_end) {
  run<false>(b, w, y, ldy, p_begin, p_end);
}

}  // namespace loragate::cpu::detail
