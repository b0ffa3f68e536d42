// matmul_int8_outlier(): the activation rows are quantised here, by one code
// for every kernel (so the int8 values, scales and outlier lists are the
// same on every path), then W's panels are split among the compute pool's
// threads as matmul() splits them and each thread runs the kernel of the
// ISA over its panels. Operation order: int8_matmul_internal.h.
//
// Outliers: x is an outlier when !(|x| <= threshold), with the threshold
// capped at FLT_MAX, so inf and NaN are always outliers: they reach y
// through the f32 part, as through an f32 matmul, instead of making the
// row's scale infinite. (A NaN threshold therefore acts as +inf.)
//
// Batch invariance: a row's values, scale and outliers depend on that row
// alone, and every output is one fixed sequence of operations.
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/int8_matmul.h"
#include "kernels/cpu/int8_matmul_internal.h"
#include "kernels/cpu/thread_pool.h"

namespace loragate::cpu {
namespace detail {
namespace {

bool cpu_has_vnni() {
  static const bool vnni = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") != 0;
  }();
  return vnni;
}

bool is_outlier(float v, float limit) { return !(std::fabs(v) <= limit); }

int64_t count_outliers(const float* row, int64_t k, float limit) {
  int64_t n = 0;
  for (int64_t i = 0; i < k; ++i) n += is_outlier(row[i], limit);
  return n;
}

// Quantises one row into q (q_len values, zero at outliers and past K) and
// lists its outlier columns in `cols`; returns the row's scale.
float quantize_row(const float* row, int64_t k, float limit, int8_t* q, int64_t q_len, int32_t* cols) {
  float amax = 0;
  for (int64_t i = 0; i < k; ++i) {
    if (!is_outlier(row[i], limit)) amax = std::max(amax, std::fabs(row[i]));
  }
  const float sx = amax / 127.0f;
  for (int64_t i = 0; i < k; ++i) {
    if (is_outlier(row[i], limit)) {
      *cols++ = static_cast<int32_t>(i);
      q[i] = 0;
    } else {
      // |row[i] / sx| <= 127 up to rounding; the clamp only guards that.
      q[i] = sx > 0 ? static_cast<int8_t>(std::clamp(round_to_even(row[i] / sx), -127.0f, 127.0f)) : 0;
    }
  }
  std::memset(q + k, 0, static_cast<size_t>(q_len - k));
  return sx;
}

}  // namespace

const char* int8_kernel_name(Int8Kernel kernel) {
  switch (kernel) {
    case Int8Kernel::kScalar: return "scalar";
    case Int8Kernel::kAvx2: return "avx2";
    case Int8Kernel::kAvx512Bw: return "avx512bw";
    case Int8Kernel::kAvx512Vnni: return "avx512vnni";
  }
  return "?";
}

Int8Kernel int8_kernel_for(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return cpu_has_vnni() ? Int8Kernel::kAvx512Vnni : Int8Kernel::kAvx512Bw;
    case Isa::kAvx2: return Int8Kernel::kAvx2;
    case Isa::kScalar: return Int8Kernel::kScalar;
  }
  return Int8Kernel::kScalar;
}

std::vector<Int8Kernel> supported_int8_kernels() {
  std::vector<Int8Kernel> out = {Int8Kernel::kScalar};
  if (cpu_supports(Isa::kAvx2)) out.push_back(Int8Kernel::kAvx2);
  if (cpu_supports(Isa::kAvx512)) out.push_back(Int8Kernel::kAvx512Bw);
  if (cpu_supports(Isa::kAvx512) && cpu_has_vnni()) out.push_back(Int8Kernel::kAvx512Vnni);
  return out;
}

void matmul_int8_outlier_with(Int8Kernel kernel, int threads, const float* x, int64_t m, int64_t ldx,
                              const PackedMatrix& w, float threshold, float* y, int64_t ldy,
                              OutlierCounts* counts) {
  assert(is_int8(w.storage()));  // int8 (no outliers: threshold +inf) and int8-outlier share the layout
  const int64_t n = w.rows(), k = w.cols();
  if (m <= 0 || n <= 0) return;
  const float limit = std::fmin(threshold, FLT_MAX);

  // Row r's outliers go to cols[begin[r] ..): counted first, so that rows
  // can then be quantised in parallel.
  thread_local std::vector<int64_t> begin;
  begin.resize(static_cast<size_t>(m) + 1);
  begin[0] = 0;
  for (int64_t r = 0; r < m; ++r) {
    begin[static_cast<size_t>(r) + 1] = begin[static_cast<size_t>(r)] + count_outliers(x + r * ldx, k, limit);
  }
  if (counts != nullptr) {
    counts->columns += m * k;
    counts->outliers += begin[static_cast<size_t>(m)];
  }
  if (k == 0) {  // an empty sum
    for (int64_t i = 0; i < m; ++i) std::memset(y + i * ldy, 0, static_cast<size_t>(n) * sizeof(float));
    return;
  }

  const int64_t q_len = int8_quads(k) * 4;
  thread_local std::vector<int8_t> q;
  thread_local std::vector<float> sx;
  thread_local std::vector<int32_t> cols;
  q.resize(static_cast<size_t>(m * q_len));
  sx.resize(static_cast<size_t>(m));
  cols.resize(static_cast<size_t>(std::max<int64_t>(1, begin[static_cast<size_t>(m)])));
  const Int8Batch batch{m, q.data(), q_len, sx.data(), begin.data(), cols.data(), x, ldx};
  int8_t* qd = q.data();
  float* sxd = sx.data();
  int32_t* colsd = cols.data();
  const int64_t* bd = begin.data();
  auto quantize = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      sxd[r] = quantize_row(x + r * ldx, k, limit, qd + r * q_len, q_len, colsd + bd[r]);
    }
  };

  void (*panels_fn)(const Int8Batch&, const PackedMatrix&, float*, int64_t, int64_t, int64_t) = nullptr;
  switch (kernel) {
    case Int8Kernel::kScalar: panels_fn = int8_panels_scalar; break;
    case Int8Kernel::kAvx2: panels_fn = int8_panels_avx2; break;
    case Int8Kernel::kAvx512Bw: panels_fn = int8_panels_avx512bw; break;
    case Int8Kernel::kAvx512Vnni: panels_fn = int8_panels_avx512vnni; break;
  }

  run_quantized(threads, m, n, k, quantize,
                [&](int64_t p0, int64_t p1) { panels_fn(batch, w, y, ldy, p0, p1); });
}

}  // namespace detail

void matmul_int8_outlier(const float* x, int64_t m, int64_t ldx, const PackedMatrix& w, float threshold, float* y,
                         int64_t ldy, OutlierCounts* counts) {
  detail::matmul_int8_outlier_with(detail::int8_kernel_for(best_isa()), 0, x, m, ldx, w, threshold, y, ldy, counts);
}

}  // namespace loragate::cpu
