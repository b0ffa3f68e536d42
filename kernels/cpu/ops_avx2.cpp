// AVX2 lanes: the 16 lanes as two ymm registers (lanes 0-7, 8-15), each
// operation one instruction per half, so this path gives the AVX-512 bits
// on CPUs without AVX-512.
#include <immintrin.h>

#define LG_LANES_TARGET __attribute__((target("avx2,fma")))
#include "kernels/cpu/lane_kernels.h"

namespace loragate::cpu::detail {
namespace {

struct Avx2Lanes {
  struct F {
    __m256 lo, hi;
  };
  struct I {
    __m256i lo, hi;
  };
  struct M {  // all ones in a true lane
    __m256i lo, hi;
  };

  // C++ lets a compiler fuse a product into the add that follows it, and GCC
  // does (-ffp-contract=fast is its C++ default) where FMA is enabled, which
  // would round once where the scalar lanes round twice. An empty asm makes
  // the product opaque, so it is rounded as written.
  LG_LANES_TARGET static __m256 as_rounded(__m256 v) {
    asm("" : "+x"(v));
    return v;
  }

  LG_LANES_TARGET static F zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  LG_LANES_TARGET static F set(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
  LG_LANES_TARGET static I set_i(int32_t k) { return {_mm256_set1_epi32(k), _mm256_set1_epi32(k)}; }
  LG_LANES_TARGET static I iota() {
    return {_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15)};
  }

  LG_LANES_TARGET static F load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  LG_LANES_TARGET static void store(float* p, F v) {
    _mm256_storeu_ps(p, v.lo);
    _mm256_storeu_ps(p + 8, v.hi);
  }
  // Masked-off lanes are neither read nor written, so a partial block at the
  // end of a buffer never touches memory past it.
  LG_LANES_TARGET static F load_first(const float* p, int n) {
    const M m = first(n);
    return {_mm256_maskload_ps(p, m.lo), _mm256_maskload_ps(p + 8, m.hi)};
  }
  LG_LANES_TARGET static void store_first(float* p, F v, int n) {
    const M m = first(n);
    _mm256_maskstore_ps(p, m.lo, v.lo);
    _mm256_maskstore_ps(p + 8, m.hi, v.hi);
  }
  LG_LANES_TARGET static void store_i(int32_t* p, I v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v.lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 8), v.hi);
  }

  LG_LANES_TARGET static F add(F a, F b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
  LG_LANES_TARGET static F sub(F a, F b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
  LG_LANES_TARGET static F mul(F a, F b) {
    return {as_rounded(_mm256_mul_ps(a.lo, b.lo)), as_rounded(_mm256_mul_ps(a.hi, b.hi))};
  }
  LG_LANES_TARGET static F div(F a, F b) { return {_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)}; }
  LG_LANES_TARGET static F fma(F a, F b, F c) {
    return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
  }
  LG_LANES_TARGET static F min(F a, F b) { return {_mm256_min_ps(a.lo, b.lo), _mm256_min_ps(a.hi, b.hi)}; }
  LG_LANES_TARGET static F max(F a, F b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }

  LG_LANES_TARGET static M greater(F a, F b) {
    return {_mm256_castps_si256(_mm256_cmp_ps(a.lo, b.lo, _CMP_GT_OQ)),
            _mm256_castps_si256(_mm256_cmp_ps(a.hi, b.hi, _CMP_GT_OQ))};
  }
  LG_LANES_TARGET static M first(int n) {
    const __m256i count = _mm256_set1_epi32(n);
    const I lane = iota();
    return {_mm256_cmpgt_epi32(count, lane.lo), _mm256_cmpgt_epi32(count, lane.hi)};
  }
  LG_LANES_TARGET static F select(M m, F a, F b) {
    return {_mm256_blendv_ps(b.lo, a.lo, _mm256_castsi256_ps(m.lo)),
            _mm256_blendv_ps(b.hi, a.hi, _mm256_castsi256_ps(m.hi))};
  }
  LG_LANES_TARGET static I select_i(M m, I a, I b) {
    return {_mm256_blendv_epi8(b.lo, a.lo, m.lo), _mm256_blendv_epi8(b.hi, a.hi, m.hi)};
  }

  LG_LANES_TARGET static I bits(F a) { return {_mm256_castps_si256(a.lo), _mm256_castps_si256(a.hi)}; }
  LG_LANES_TARGET static I add_i(I a, I b) { return {_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi)}; }
  LG_LANES_TARGET static I sub_i(I a, I b) { return {_mm256_sub_epi32(a.lo, b.lo), _mm256_sub_epi32(a.hi, b.hi)}; }
  LG_LANES_TARGET static I half_i(I a) { return {_mm256_srai_epi32(a.lo, 1), _mm256_srai_epi32(a.hi, 1)}; }
  LG_LANES_TARGET static F pow2(I k) {
    const __m256i bias = _mm256_set1_epi32(127);
    return {_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k.lo, bias), 23)),
            _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k.hi, bias), 23))};
  }

  // The halves fold: lo + hi is lanes l + l + 8; then within the ymm.
  LG_LANES_TARGET static float sum(F a) {
    const __m256 s8 = _mm256_add_ps(a.lo, a.hi);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  LG_LANES_TARGET static float max_lane(F a) {
    const __m256 s8 = _mm256_max_ps(a.lo, a.hi);
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

}  // namespace

const CpuOps& avx2_ops() {
  static const CpuOps ops = make_cpu_ops<Avx2Lanes>();
  return ops;
}

}  // namespace loragate::cpu::detail
