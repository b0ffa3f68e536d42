// matmul(): run-time ISA dispatch, M tiling and the split over panels among
// the compute pool's threads.
//
// Work split: threads take contiguous ranges of W panels (output columns) and
// every thread runs all M tiles over its panels, so each weight byte is read
// from memory once per call and K is never split: batch invariance holds for
// any thread count.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/int4_matmul_internal.h"
#include "kernels/cpu/int8_matmul_internal.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/thread_pool.h"

namespace loragate::cpu {
namespace detail {

int max_mr(Isa isa) { return isa == Isa::kAvx2 ? 6 : kMaxMR; }

namespace {

// Activations of one tile, transposed so a kernel finds x[r][k] at
// xp[k * mr + r]: one pointer walks all rows, whatever ldx is.
void pack_x(const float* x, int64_t ldx, int mr, int64_t k, float* xp) {
  for (int r = 0; r < mr; ++r) {
    const float* row = x + r * ldx;
    for (int64_t i = 0; i < k; ++i) xp[i * mr + r] = row[i];
  }
}

}  // namespace

void matmul_with(Isa isa, int threads, const float* x, int64_t m, int64_t ldx, const PackedMatrix& w,
                 float* y, int64_t ldy) {
  // Quantised storage runs integer dot products (int4_matmul_internal.h,
  // int8_matmul_internal.h): int8 is int8-outlier's W8A8 with no outliers.
  if (is_int4(w.storage())) return matmul_int4_with(int8_kernel_for(isa), threads, x, m, ldx, w, y, ldy);
  if (is_int8(w.storage())) {
    return matmul_int8_outlier_with(int8_kernel_for(isa), threads, x, m, ldx, w,
                                    std::numeric_limits<float>::infinity(), y, ldy, nullptr);
  }
  const int64_t n = w.rows(), k = w.cols();
  if (m <= 0 || n <= 0) return;
  if (k == 0) {  // an empty sum
    for (int64_t i = 0; i < m; ++i) std::memset(y + i * ldy, 0, static_cast<size_t>(n) * sizeof(float));
    return;
  }

  // Near-equal tiles no taller than the kernels allow (32 rows -> 11+11+10),
  // so no tile is a thin, inefficient remainder.
  const int mr_max = max_mr(isa);
  const int ntiles = static_cast<int>((m + mr_max - 1) / mr_max);
  thread_local std::vector<Tile> tiles;
  thread_local std::vector<float> xbuf;
  tiles.resize(static_cast<size_t>(ntiles));
  if (m > 1) xbuf.resize(static_cast<size_t>(m * k));
  std::vector<int64_t> row0(static_cast<size_t>(ntiles) + 1);
  for (int t = 0; t <= ntiles; ++t) row0[static_cast<size_t>(t)] = m * t / ntiles;
  for (int t = 0; t < ntiles; ++t) {
    const int64_t r0 = row0[static_cast<size_t>(t)];
    const int mr = static_cast<int>(row0[static_cast<size_t>(t) + 1] - r0);
    // A single row needs no packing: its activations are already k-contiguous.
    tiles[static_cast<size_t>(t)] = {mr == 1 ? x + r0 * ldx : xbuf.data() + r0 * k, mr, y + r0 * ldy};
  }

  const int64_t panels = num_panels(n);
  ThreadPool& pool = compute_pool();
  int nthreads = threads > 0 ? threads : pool.size();
  if (n * k < kMinParallelWeights) nthreads = 1;
  nthreads = static_cast<int>(std::min<int64_t>(nthreads, panels));

  const Tile* tl = tiles.data();
  float* xb = xbuf.data();
  pool.run(nthreads, [&](int thread, int nt) {
    if (m > 1) {  // (the same on every thread) a single row needs no packing, so no barrier
      for (int t = ntiles * thread / nt; t < ntiles * (thread + 1) / nt; ++t) {
        const Tile& tile = tl[t];
        const int64_t r0 = row0[static_cast<size_t>(t)];
        if (tile.mr > 1) pack_x(x + r0 * ldx, ldx, tile.mr, k, xb + r0 * k);
      }
      ThreadPool::barrier();  // every tile is packed before any kernel reads it
    }
    const int64_t p0 = panels * thread / nt, p1 = panels * (thread + 1) / nt;
    if (p0 < p1) {
      switch (isa) {
        case Isa::kAvx512: run_panels_avx512(tl, ntiles, ldy, w, p0, p1); break;
        case Isa::kAvx2: run_panels_avx2(tl, ntiles, ldy, w, p0, p1); break;
        case Isa::kScalar: run_panels_scalar(tl, ntiles, ldy, w, p0, p1); break;
      }
    }
  });
}

}  // namespace detail

void matmul(const float* x, int64_t m, int64_t ldx, const PackedMatrix& w, float* y, int64_t ldy) {
  detail::matmul_with(best_isa(), 0, x, m, ldx, w, y, ldy);
}

}  // namespace loragate::cpu
