// AVX-512 lanes: the 16 lanes are one zmm register, partial blocks use mask
// registers, and each operation is one instruction.

// GCC 12's AVX-512 intrinsics pass an "undefined" vector as a dummy source,
// which -W(maybe-)uninitialized flags inside the header; the value is unused.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#define LG_LANES_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#include "kernels/cpu/lane_kernels.h"

namespace loragate::cpu::detail {
namespace {

struct Avx512Lanes {
  using F = __m512;
  using I = __m512i;
  using M = __mmask16;

  // C++ lets a compiler fuse a product into the add that follows it, and GCC
  // does (-ffp-contract=fast is its C++ default) where FMA is enabled, which
  // would round once where the scalar lanes round twice. An empty asm makes
  // the product opaque, so it is rounded as written.
  LG_LANES_TARGET static F as_rounded(F v) {
    asm("" : "+v"(v));
    return v;
  }

  LG_LANES_TARGET static F zero() { return _mm512_setzero_ps(); }
  LG_LANES_TARGET static F set(float x) { return _mm512_set1_ps(x); }
  LG_LANES_TARGET static I set_i(int32_t k) { return _mm512_set1_epi32(k); }
  LG_LANES_TARGET static I iota() { return _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }

  LG_LANES_TARGET static F load(const float* p) { return _mm512_loadu_ps(p); }
  LG_LANES_TARGET static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  // Masked-off lanes are neither read nor written (no fault past a buffer).
  LG_LANES_TARGET static F load_first(const float* p, int n) { return _mm512_maskz_loadu_ps(first(n), p); }
  LG_LANES_TARGET static void store_first(float* p, F v, int n) { _mm512_mask_storeu_ps(p, first(n), v); }
  LG_LANES_TARGET static void store_i(int32_t* p, I v) { _mm512_storeu_si512(p, v); }

  LG_LANES_TARGET static F add(F a, F b) { return _mm512_add_ps(a, b); }
  LG_LANES_TARGET static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  LG_LANES_TARGET static F mul(F a, F b) { return as_rounded(_mm512_mul_ps(a, b)); }
  LG_LANES_TARGET static F div(F a, F b) { return _mm512_div_ps(a, b); }
  LG_LANES_TARGET static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  LG_LANES_TARGET static F min(F a, F b) { return _mm512_min_ps(a, b); }
  LG_LANES_TARGET static F max(F a, F b) { return _mm512_max_ps(a, b); }

  LG_LANES_TARGET static M greater(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  LG_LANES_TARGET static M first(int n) { return static_cast<M>((1u << n) - 1u); }
  LG_LANES_TARGET static F select(M m, F a, F b) { return _mm512_mask_blend_ps(m, b, a); }
  LG_LANES_TARGET static I select_i(M m, I a, I b) { return _mm512_mask_blend_epi32(m, b, a); }

  LG_LANES_TARGET static I bits(F a) { return _mm512_castps_si512(a); }
  LG_LANES_TARGET static I add_i(I a, I b) { return _mm512_add_epi32(a, b); }
  LG_LANES_TARGET static I sub_i(I a, I b) { return _mm512_sub_epi32(a, b); }
  LG_LANES_TARGET static I half_i(I a) { return _mm512_srai_epi32(a, 1); }
  LG_LANES_TARGET static F pow2(I k) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k, _mm512_set1_epi32(127)), 23));
  }

  // The halves fold: the upper 256 bits onto the lower, then within the ymm.
  LG_LANES_TARGET static float sum(F a) {
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  LG_LANES_TARGET static float max_lane(F a) {
    const __m256 s8 = _mm256_max_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

}  // namespace

const CpuOps& avx512_ops() {
  static const CpuOps ops = make_cpu_ops<Avx512Lanes>();
  return ops;
}

}  // namespace loragate::cpu::detail
