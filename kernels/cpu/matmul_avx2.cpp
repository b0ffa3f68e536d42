// AVX2 kernels for x86-64 CPUs without AVX-512: the same panels and the same
// per-output FMA order as the AVX-512 path (so bit-identical results), with
// 8-lane vectors. Sixteen ymm registers bound a tile at 3 rows x 32 columns
// (12 accumulators); a single row streams 2 panels for more chains.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/matmul_internal.h"

#define LG_AVX2 __attribute__((target("avx2,fma")))

namespace loragate::cpu::detail {
namespace {

constexpr int64_t kPrefetchBytes = 1024;

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

template <int MR, int NP, bool BF16>
LG_AVX2 void kernel(const float* xp, const uint8_t* w, int64_t panel_bytes, int64_t k, float* y, int64_t ldy,
                    int64_t n_valid) {
  constexpr int64_t kStep = BF16 ? 64 : 128;
  __m256 acc[MR][NP][4];
  for (int r = 0; r < MR; ++r)
    for (int p = 0; p < NP; ++p)
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
  for (int p = 0; p < NP; ++p) {
    const int64_t valid = std::min<int64_t>(kNR, n_valid - p * kNR);
    for (int r = 0; r < MR; ++r) {
      float* yr = y + r * ldy + p * kNR;
      if (valid == kNR) {
        for (int q = 0; q < 4; ++q) _mm256_storeu_ps(yr + 8 * q, acc[r][p][q]);
      } else if (valid > 0) {  // the zero-padded last panel
        alignas(32) float tmp[kNR];
        for (int q = 0; q < 4; ++q) _mm256_store_ps(tmp + 8 * q, acc[r][p][q]);
        std::memcpy(yr, tmp, static_cast<size_t>(valid) * sizeof(float));
      }
    }
  }
}

template <bool BF16>
void run(const Tile* tiles, int ntiles, int64_t ldy, const PackedMatrix& w, int64_t p_begin, int64_t p_end) {
  const int64_t k = w.cols(), n = w.rows();
  const int64_t panel_bytes = k * kNR * (BF16 ? 2 : 4);
  const auto* base = static_cast<const uint8_t*>(w.data());
  for (int64_t g = p_begin; g < p_end; g += 2) {
    const int64_t g_end = std::min<int64_t>(g + 2, p_end);
    for (int t = 0; t < ntiles; ++t) {
      const Tile& tile = tiles[t];
      for (int64_t p = g; p < g_end;) {
        const uint8_t* wp = base + p * panel_bytes;
        float* yp = tile.y + p * kNR;
        const int64_t nv = n - p * kNR;
        if (tile.mr == 1 && g_end - p == 2) {
          kernel<1, 2, BF16>(tile.xp, wp, panel_bytes, k, yp, ldy, nv);
          p += 2;
          continue;
        }
        switch (tile.mr) {
          case 1: kernel<1, 1, BF16>(tile.xp, wp, panel_bytes, k, yp, ldy, nv); break;
          case 2: kernel<2, 1, BF16>(tile.xp, wp, panel_bytes, k, yp, ldy, nv); break;
          default: kernel<3, 1, BF16>(tile.xp, wp, panel_bytes, k, yp, ldy, nv); break;
        }
        p += 1;
      }
    }
  }
}

}  // namespace

void run_panels_avx2(const Tile* tiles, int ntiles, int64_t ldy, const PackedMatrix& w, int64_t p_begin,
                     int64_t p_end) {
  if (w.storage() == DType::kBF16)
    run<true>(tiles, ntiles, ldy, w, p_begin, p_end);
  else
    run<false>(tiles, ntiles, ldy, w, p_begin, p_end);
}

}  // namespace loragate::cpu::detail
