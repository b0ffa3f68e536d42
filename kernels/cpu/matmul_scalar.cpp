// Portable fallback with the same operation order as the vector kernels: one
// accumulator per output starting at +0, acc = fma(x[k], w[n][k], acc) for
// k = 0..K-1. std::fma rounds once, like a hardware FMA, so results match
// the AVX2/AVX-512 paths bit for bit; the reference for every float kernel.
// (Quantised storage never comes here: matmul_with() hands it to the integer
// kernels.)
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/matmul_internal.h"

namespace loragate::cpu::detail {

void run_panels_scalar(const Tile* tiles, int ntiles, int64_t ldy, const PackedMatrix& w, int64_t p_begin,
                       int64_t p_end) {
  const WeightType storage = w.storage();
  const bool bf16 = storage == WeightType::kBF16;
  const int64_t k = w.cols(), n = w.rows();
  const auto* wf = static_cast<const float*>(w.data());
  const auto* wh = static_cast<const uint16_t*>(w.data());
  float acc[kMaxMR][kNR];
  float wk[kNR];
  for (int64_t p = p_begin; p < p_end; ++p) {
    const int64_t panel = p * k * kNR;  // element offset of the panel
    const int64_t valid = std::min<int64_t>(kNR, n - p * kNR);
    for (int t = 0; t < ntiles; ++t) {
      const Tile& tile = tiles[t];
      std::memset(acc, 0, sizeof acc);
      for (int64_t i = 0; i < k; ++i) {
        const int64_t line = panel + i * kNR;
        for (int j = 0; j < kNR; ++j) wk[j] = bf16 ? bf16_to_f32(wh[line + bf16_slot(j)]) : wf[line + j];
        for (int r = 0; r < tile.mr; ++r) {
          const float xv = tile.xp[i * tile.mr + r];
          for (int j = 0; j < kNR; ++j) acc[r][j] = std::fma(xv, wk[j], acc[r][j]);
        }
      }
      for (int r = 0; r < tile.mr; ++r)
        std::memcpy(tile.y + r * ldy + p * kNR, acc[r], static_cast<size_t>(valid) * sizeof(float));
    }
  }
}

}  // namespace loragate::cpu::detail
