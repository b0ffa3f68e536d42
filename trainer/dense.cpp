// Dense products of the trainer on the server's matmul kernel; see dense.h.
#include "trainer/dense.h"

#include <algorithm>
#include <atomic>

#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/vec.h"

namespace loragate::train {
namespace {

// Below this many weights cpu::matmul keeps a matrix on one thread; the
// trainer then splits x's rows among threads instead, kDenseRowBlock at a time.
constexpr int64_t kSmallMatrixWeights = 64 * 1024;
constexpr int64_t kDenseRowBlock = 64;

// Columns of one dense_tn_accumulate task: `rows` rows of out stay in L1.
constexpr int64_t kMaxColumnBlock = 512;

}  // namespace

void matmul_rows(const float* x, int64_t m, int64_t ldx, const cpu::PackedMatrix& w, float* y, int64_t ldy) {
  cpu::ThreadPool& pool = cpu::compute_pool();
  const int64_t blocks = (m + kDenseRowBlock - 1) / kDenseRowBlock;
  if (w.rows() * w.cols() >= kSmallMatrixWeights || blocks < 2 || pool.size() < 2) {
    cpu::matmul(x, m, ldx, w, y, ldy);
    return;
  }
  std::atomic<int64_t> next{0};
  pool.run(static_cast<int>(std::min<int64_t>(blocks, pool.size())), [&](int, int) {
    for (int64_t b; (b = next.fetch_add(1, std::memory_order_relaxed)) < blocks;) {
      const int64_t r0 = b * kDenseRowBlock;
      // Nested in this run, cpu::matmul runs serially on this thread.
      cpu::matmul(x + r0 * ldx, std::min(kDenseRowBlock, m - r0), ldx, w, y + r0 * ldy, ldy);
    }
  });
}

void dense_nt(const float* x, int64_t m, int64_t k, int64_t ldx, const float* w, int64_t n, float* y, int64_t ldy,
              float alpha, bool accumulate) {
  if (m == 0 || n == 0) return;
  const cpu::PackedMatrix packed = cpu::PackedMatrix::pack(w, DType::kF32, n, k, WeightType::kF32);
  if (!accumulate && alpha == 1.0f) {
    matmul_rows(x, m, ldx, packed, y, ldy);
    return;
  }
  thread_local std::vector<float> out;
  out.resize(static_cast<size_t>(m * n));
  matmul_rows(x, m, ldx, packed, out.data(), n);
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

void dense_tn_accumulate(const float* u, int64_t n, int64_t rows, int64_t ldu, const float* v, int64_t cols,
                         int64_t ldv, float* out, int64_t ldo, float alpha) {
  if (n == 0 || rows == 0 || cols == 0) return;
  cpu::ThreadPool& pool = cpu::compute_pool();
  // Enough column blocks for every thread, each a multiple of 16 columns.
  const int64_t per_thread = (cols + pool.size() - 1) / pool.size();
  const int64_t width = std::clamp<int64_t>((per_thread + 15) / 16 * 16, 16, kMaxColumnBlock);
  const int64_t blocks = (cols + width - 1) / width;
  std::atomic<int64_t> next{0};
  pool.run(static_cast<int>(std::min<int64_t>(blocks, pool.size())), [&](int, int) {
    for (int64_t b; (b = next.fetch_add(1, std::memory_order_relaxed)) < blocks;) {
      const int64_t c0 = b * width, len = std::min(width, cols - c0);
      for (int64_t t = 0; t < n; ++t) {
        const float* ut = u + t * ldu;
        const float* vt = v + t * ldv + c0;
        for (int64_t r = 0; r < rows; ++r) cpu::vec_axpy(alpha * ut[r], vt, out + r * ldo + c0, len);
      }
    }
  });
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
