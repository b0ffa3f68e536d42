// The scalar int8-outlier kernel: the reference every vector kernel must
// equal bit for bit. It spells out the operation order of
// int8_matmul_internal.h one output at a time.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/int8_matmul_internal.h"

namespace loragate::cpu::detail {

void int8_panels_scalar(const Int8Batch& b, const PackedMatrix& w, float* y, int64_t ldy, int64_t p_begin,
                        int64_t p_end) {
  const int64_t n = w.rows(), k = w.cols(), quads = int8_quads(k);
  const int64_t pb = panel_bytes(WeightType::kInt8Outlier, k);
  const auto* base = static_cast<const uint8_t*>(w.data());
  for (int64_t p = p_begin; p < p_end; ++p) {
    const uint8_t* panel = base + p * pb;
    const auto* scales = reinterpret_cast<const float*>(panel);
    const int nrows = static_cast<int>(std::min<int64_t>(kNR, n - p * kNR));
    for (int64_t r = 0; r < b.m; ++r) {
      const int8_t* q = b.q + r * b.q_stride;
      const float* x = b.x + r * b.ldx;
      float* yr = y + r * ldy + p * kNR;
      for (int j = 0; j < nrows; ++j) {
        // Row j's quads: 4 bytes every line (kNR * 4 bytes), see matmul_internal.h.
        const auto* wq = reinterpret_cast<const int8_t*>(panel + kInt8ScaleBytes + (j / 16) * 64 + (j % 16) * 4);
        int32_t dot = 0;
        for (int64_t i = 0; i < quads; ++i) {
          for (int c = 0; c < 4; ++c) dot += int32_t{q[4 * i + c]} * int32_t{wq[i * kNR * 4 + c]};
        }
        float acc = static_cast<float>(dot) * (b.sx[r] * scales[j]);
        for (int64_t o = b.begin[r]; o < b.begin[r + 1]; ++o) {
          const int32_t c = b.cols[o];
          acc = std::fma(x[c], dequantize(WeightType::kInt8Outlier, panel, j, c), acc);
        }
        yr[j] = acc;
      }
    }
  }
}

}  // namespace loragate::cpu::detail
