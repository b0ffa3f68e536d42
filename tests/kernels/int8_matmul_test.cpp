// matmul_int8_outlier: every kernel equals, bit for bit, a reference written
// here from the spec (int8_matmul.h, operation order in
// int8_matmul_internal.h) on random shapes with ragged panels and K % 4 != 0;
// the result is within the activation quantisation error of the f32 product;
// rows are batch invariant; threshold +inf means no outliers and a row of
// outliers only is the exact f32 FMA chain.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/int8_matmul.h"
#include "kernels/cpu/int8_matmul_internal.h"
#include "kernels/cpu/matmul_internal.h"

namespace loragate::cpu {
namespace {

using detail::Int8Kernel;

constexpr float kThreshold = 6.0f;

PackedMatrix random_weights(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 0.05f);
  std::vector<float> w(static_cast<size_t>(n * k));
  for (auto& v : w) v = d(rng);
  return PackedMatrix::pack(w.data(), DType::kF32, n, k, WeightType::kInt8Outlier);
}

// Activations like a transformer's: mostly N(0, 1), with a few outlier
// columns (|x| well above the threshold) in most rows; every fourth row has
// none and every seventh is zero.
std::vector<float> random_activations(int64_t m, int64_t k, int64_t ldx, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::uniform_int_distribution<int> pick(0, 15);
  std::vector<float> x(static_cast<size_t>(m * ldx), std::numeric_limits<float>::quiet_NaN());  // NaN past k
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      float v = std::clamp(d(rng), -5.5f, 5.5f);
      if (r % 4 != 3 && pick(rng) == 0) v = (v < 0 ? -1.f : 1.f) * (kThreshold + 1.f + 4.f * std::fabs(v));
      if (r % 7 == 6) v = 0;
      x[static_cast<size_t>(r * ldx + c)] = v;
    }
  }
  return x;
}

// The packed int8 weight and scale of (n, c), read from the layout.
int8_t weight_q(const PackedMatrix& w, int64_t n, int64_t c) {
  const auto* panel = static_cast<const uint8_t*>(w.data()) +
                      (n / detail::kNR) * detail::panel_bytes(WeightType::kInt8Outlier, w.cols());
  const int64_t j = n % detail::kNR;
  return static_cast<int8_t>(panel[detail::kInt8ScaleBytes + (c / 4) * 128 + (j / 16) * 64 + (j % 16) * 4 + c % 4]);
}
float weight_scale(const PackedMatrix& w, int64_t n) {
  const auto* panel = static_cast<const uint8_t*>(w.data()) +
                      (n / detail::kNR) * detail::panel_bytes(WeightType::kInt8Outlier, w.cols());
  return reinterpret_cast<const float*>(panel)[n % detail::kNR];
}

// The spec, one output at a time.
std::vector<float> reference(const std::vector<float>& x, int64_t m, int64_t ldx, const PackedMatrix& w,
                             float threshold) {
  const int64_t n = w.rows(), k = w.cols();
  std::vector<float> y(static_cast<size_t>(m * n));
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x.data() + r * ldx;
    std::vector<bool> outlier(static_cast<size_t>(k));
    float amax = 0;
    for (int64_t c = 0; c < k; ++c) {
      outlier[static_cast<size_t>(c)] = std::fabs(xr[c]) > threshold;
      if (!outlier[static_cast<size_t>(c)]) amax = std::max(amax, std::fabs(xr[c]));
    }
    const float sx = amax / 127.0f;
    for (int64_t o = 0; o < n; ++o) {
      int32_t dot = 0;
      for (int64_t c = 0; c < k; ++c) {
        if (outlier[static_cast<size_t>(c)] || sx == 0) continue;
        dot += static_cast<int32_t>(std::nearbyint(xr[c] / sx)) * weight_q(w, o, c);
      }
      float acc = static_cast<float>(dot) * (sx * weight_scale(w, o));
      for (int64_t c = 0; c < k; ++c) {
        if (outlier[static_cast<size_t>(c)]) acc = std::fma(xr[c], w.at(o, c), acc);
      }
      y[static_cast<size_t>(r * n + o)] = acc;
    }
  }
  return y;
}

// y of one kernel, written with row stride ldy >= n (the gaps must stay untouched).
std::vector<float> run(Int8Kernel kernel, int threads, const std::vector<float>& x, int64_t m, int64_t ldx,
                       const PackedMatrix& w, float threshold, int64_t ldy, OutlierCounts* counts = nullptr) {
  std::vector<float> y(static_cast<size_t>(m * ldy), -7.f);
  detail::matmul_int8_outlier_with(kernel, threads, x.data(), m, ldx, w, threshold, y.data(), ldy, counts);
  return y;
}

// The n outputs of each row (dropping the ldy gaps, which must still hold the fill value).
std::vector<float> compact(const std::vector<float>& y, int64_t m, int64_t n, int64_t ldy) {
  std::vector<float> out;
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < ldy; ++c) {
      const float v = y[static_cast<size_t>(r * ldy + c)];
      if (c < n) {
        out.push_back(v);
      } else {
        EXPECT_EQ(v, -7.f) << "wrote past n at row " << r;
      }
    }
  }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Int8Outlier, EveryKernelEqualsTheReferenceBitForBit) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> dm(1, 40), dn(1, 100), dk(1, 150);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t m = dm(rng), n = dn(rng), k = dk(rng), ldx = k + trial % 3, ldy = n + trial % 2;
    SCOPED_TRACE("M=" + std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k));
    const PackedMatrix w = random_weights(n, k, static_cast<uint32_t>(trial));
    const auto x = random_activations(m, k, ldx, static_cast<uint32_t>(1000 + trial));
    const auto want = reference(x, m, ldx, w, kThreshold);
    for (Int8Kernel kernel : detail::supported_int8_kernels()) {
      SCOPED_TRACE(detail::int8_kernel_name(kernel));
      ASSERT_TRUE(same_bits(compact(run(kernel, 0, x, m, ldx, w, kThreshold, ldy), m, n, ldy), want));
    }
  }
}

// Panels larger than the L2 group and several row tiles: the blocking of
// for_each_int8_tile in every shape the kernels use; large enough to run on
// every thread of the pool (small shapes run on one), and on one.
TEST(Int8Outlier, LargeShapesEqualTheReference) {
  const int64_t n = 200, k = 4099;
  const PackedMatrix w = random_weights(n, k, 7);
  for (int64_t m : {1, 2, 5, 13, 26}) {
    SCOPED_TRACE("M=" + std::to_string(m));
    const auto x = random_activations(m, k, k, static_cast<uint32_t>(m));
    const auto want = reference(x, m, k, w, kThreshold);
    for (Int8Kernel kernel : detail::supported_int8_kernels()) {
      SCOPED_TRACE(detail::int8_kernel_name(kernel));
      for (int threads : {0, 1}) EXPECT_TRUE(same_bits(run(kernel, threads, x, m, k, w, kThreshold, n), want));
    }
  }
}

TEST(Int8Outlier, KernelsFollowTheIsa) {
  const auto kernels = detail::supported_int8_kernels();
  EXPECT_EQ(kernels.front(), Int8Kernel::kScalar);
  for (Isa isa : supported_isas()) {
    EXPECT_NE(std::find(kernels.begin(), kernels.end(), detail::int8_kernel_for(isa)), kernels.end());
  }
  if (cpu_supports(Isa::kAvx512)) {  // the fallback kernel is tested on VNNI CPUs too
    EXPECT_NE(std::find(kernels.begin(), kernels.end(), Int8Kernel::kAvx512Bw), kernels.end());
  }
}

// |x - q * sx| <= sx / 2 for every quantised activation, so each output is
// within sx / 2 * sum_k |w[n][k]| of the f32 product (plus f32 rounding).
TEST(Int8Outlier, CloseToTheF32Product) {
  const int64_t m = 9, n = 70, k = 301;
  const PackedMatrix w = random_weights(n, k, 3);
  const auto x = random_activations(m, k, k, 4);
  for (Int8Kernel kernel : detail::supported_int8_kernels()) {
    SCOPED_TRACE(detail::int8_kernel_name(kernel));
    const auto y = run(kernel, 0, x, m, k, w, kThreshold, n);
    double worst = 0;
    for (int64_t r = 0; r < m; ++r) {
      float amax = 0;
      for (int64_t c = 0; c < k; ++c) {
        const float v = std::fabs(x[static_cast<size_t>(r * k + c)]);
        if (v <= kThreshold) amax = std::max(amax, v);
      }
      const double sx = amax / 127.0;
      for (int64_t o = 0; o < n; ++o) {
        double exact = 0, sum_w = 0, sum_xw = 0;
        for (int64_t c = 0; c < k; ++c) {
          const double xv = x[static_cast<size_t>(r * k + c)], wv = w.at(o, c);
          exact += xv * wv;
          sum_w += std::fabs(wv);
          sum_xw += std::fabs(xv * wv);
        }
        const double err = std::fabs(y[static_cast<size_t>(r * n + o)] - exact);
        ASSERT_LE(err, sx / 2 * sum_w * (1 + 1e-5) + 1e-5 * sum_xw + 1e-30) << "row " << r << " output " << o;
        worst = std::max(worst, err);
      }
    }
    EXPECT_GT(worst, 0) << "no error at all: the activations were not quantised";
  }
}

TEST(Int8Outlier, ARowDoesNotDependOnTheBatch) {
  const int64_t m = 23, n = 97, k = 131;
  const PackedMatrix w = random_weights(n, k, 5);
  const auto x = random_activations(m, k, k, 6);
  for (Int8Kernel kernel : detail::supported_int8_kernels()) {
    SCOPED_TRACE(detail::int8_kernel_name(kernel));
    const auto batch = run(kernel, 0, x, m, k, w, kThreshold, n);
    for (int64_t r = 0; r < m; ++r) {
      const std::vector<float> row(x.begin() + r * k, x.begin() + (r + 1) * k);
      const auto alone = run(kernel, 0, row, 1, k, w, kThreshold, n);
      ASSERT_EQ(0, std::memcmp(alone.data(), batch.data() + r * n, static_cast<size_t>(n) * sizeof(float)))
          << "row " << r;
    }
  }
}

// x / sx exactly halfway between two integers rounds to the even one (as
// std::nearbyint does, which the reference uses), for both signs.
TEST(Int8Outlier, TiesRoundToEven) {
  const int64_t n = 64, k = 12;
  const PackedMatrix w = random_weights(n, k, 18);
  // amax = 127, so sx = 1 and q = round(x).
  const std::vector<float> x = {127.f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -126.5f, 3.5f, 4.5f, -3.5f};
  const auto want = reference(x, 1, k, w, kThreshold * 100);
  for (Int8Kernel kernel : detail::supported_int8_kernels()) {
    SCOPED_TRACE(detail::int8_kernel_name(kernel));
    EXPECT_TRUE(same_bits(run(kernel, 0, x, 1, k, w, kThreshold * 100, n), want));
  }
  // And the reference itself rounds ties to even: q = 126 rather than 127 for 126.5.
  auto away = x;
  away[7] = 127.f;  // what rounding half away from zero would give
  EXPECT_FALSE(same_bits(reference(away, 1, k, w, kThreshold * 100), want));
}

TEST(Int8Outlier, InfiniteThresholdMeansNoOutliers) {
  const int64_t m = 6, n = 40, k = 77;
  const PackedMatrix w = random_weights(n, k, 8);
  const auto x = random_activations(m, k, k, 9);
  const float inf = std::numeric_limits<float>::infinity();
  const auto want = reference(x, m, k, w, inf);
  for (Int8Kernel kernel : detail::supported_int8_kernels()) {
    SCOPED_TRACE(detail::int8_kernel_name(kernel));
    OutlierCounts counts;
    EXPECT_TRUE(same_bits(run(kernel, 0, x, m, k, w, inf, n, &counts), want));
    EXPECT_EQ(counts.columns, m * k);
    EXPECT_EQ(counts.outliers, 0);
  }
}

TEST(Int8Outlier, CountsTheOutliers) {
  const int64_t m = 5, n = 3, k = 50;
  const PackedMatrix w = random_weights(n, k, 10);
  const auto x = random_activations(m, k, k, 11);
  int64_t want = 0;
  for (float v : x) want += std::fabs(v) > kThreshold;
  OutlierCounts counts{100, 10};  // incremented, not overwritten
  matmul_int8_outlier(x.data(), m, k, w, kThreshold, std::vector<float>(m * n).data(), n, &counts);
  EXPECT_GT(want, 0);
  EXPECT_EQ(counts.columns, 100 + m * k);
  EXPECT_EQ(counts.outliers, 10 + want);
}

// Every column an outlier: y is the f32 FMA chain over k in order, exactly.
TEST(Int8Outlier, ARowOfOutliersIsExactF32) {
  const int64_t n = 45, k = 66;
  const PackedMatrix w = random_weights(n, k, 12);
  auto x = random_activations(1, k, k, 13);
  for (auto& v : x) v = std::fabs(v) <= 1e-3f ? 0.5f : v;  // all above the threshold below
  std::vector<float> want(static_cast<size_t>(n));
  for (int64_t o = 0; o < n; ++o) {
    float acc = 0;
    for (int64_t c = 0; c < k; ++c) acc = std::fma(x[static_cast<size_t>(c)], w.at(o, c), acc);
    want[static_cast<size_t>(o)] = acc;
  }
  for (Int8Kernel kernel : detail::supported_int8_kernels()) {
    SCOPED_TRACE(detail::int8_kernel_name(kernel));
    OutlierCounts counts;
    EXPECT_TRUE(same_bits(run(kernel, 0, x, 1, k, w, 1e-3f, n, &counts), want));
    EXPECT_EQ(counts.outliers, k);
  }
}

// Non-finite activations are outliers whatever the threshold: they reach
// their row's outputs as in f32 and leave the row's scale (and other rows) alone.
TEST(Int8Outlier, NonFiniteValuesAreOutliers) {
  const int64_t m = 3, n = 20, k = 30;
  const PackedMatrix w = random_weights(n, k, 14);
  auto x = random_activations(m, k, k, 15);
  const float inf = std::numeric_limits<float>::infinity();
  auto clean = x;
  x[static_cast<size_t>(1 * k + 4)] = inf;
  const auto base = run(Int8Kernel::kScalar, 0, clean, m, k, w, inf, n);
  for (Int8Kernel kernel : detail::supported_int8_kernels()) {
    SCOPED_TRACE(detail::int8_kernel_name(kernel));
    OutlierCounts counts;
    const auto y = run(kernel, 0, x, m, k, w, inf, n, &counts);
    EXPECT_EQ(counts.outliers, 1);
    for (int64_t o = 0; o < n; ++o) EXPECT_FALSE(std::isfinite(y[static_cast<size_t>(n + o)]));
    EXPECT_EQ(0, std::memcmp(y.data(), base.data(), n * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(y.data() + 2 * n, base.data() + 2 * n, n * sizeof(float)));
  }
}

TEST(Int8Outlier, EmptySumIsZero) {
  const std::vector<float> src(4);
  const PackedMatrix w = PackedMatrix::pack(src.data(), DType::kF32, 4, 0, WeightType::kInt8Outlier);
  const std::vector<float> x(2);
  for (Int8Kernel kernel : detail::supported_int8_kernels()) {
    const auto y = run(kernel, 0, x, 2, 1, w, kThreshold, 4);
    for (float v : y) EXPECT_EQ(v, 0.f);
  }
}

TEST(Int8Outlier, PublicEntryUsesTheIsaKernel) {
  const int64_t m = 4, n = 33, k = 21;
  const PackedMatrix w = random_weights(n, k, 16);
  const auto x = random_activations(m, k, k, 17);
  std::vector<float> y(static_cast<size_t>(m * n));
  matmul_int8_outlier(x.data(), m, k, w, kThreshold, y.data(), n);
  EXPECT_TRUE(same_bits(y, run(detail::int8_kernel_for(best_isa()), 0, x, m, k, w, kThreshold, n)));
  EXPECT_TRUE(same_bits(y, reference(x, m, k, w, kThreshold)));
}

}  // namespace
}  // namespace loragate::cpu
