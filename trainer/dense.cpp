// Dense products of the trainer on the server's matmul kernel; see dense.h.
#include "trainer/dense.h"

#include <algorithm>

#include "kernels/cpu/matmul.h"

namespace loragate::train {

void dense_nt(const float* x, int64_t m, int64_t k, int64_t ldx, const float* w, int64_t n, float* y, int64_t ldy,
              float alpha, bool accumulate) {
  if (m == 0 || n == 0) return;
  const cpu::PackedMatrix packed = cpu::PackedMatrix::pack(w, DType::kF32, n, k, WeightType::kF32);
  thread_local std::vector<float> out;
  out.resize(static_cast<size_t>(m * n));
  cpu::matmul(x, m, ldx, packed, out.data(), n);
  for (int64_t r = 0; r < m; ++r) {
    const float* o = out.data() + r * n;
    float* yr = y + r * ldy;
    if (accumulate) {
      for (int64_t c = 0; c < n; ++c) yr[c] += alpha * o[c];
    } else {
      for (int64_t c = 0; c < n; ++c) yr[c] = alpha * o[c];
    }
  }
}

void transpose(const float* src, int64_t rows, int64_t cols, int64_t ld, std::vector<float>& dst) {
  dst.resize(static_cast<size_t>(rows * cols));
  constexpr int64_t kTile = 32;  // keeps both sides' lines in cache
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile)
      for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c) dst[c * rows + r] = src[r * ld + c];
}

}  // namespace loragate::train
