// The W4A8 matmul of int4 storage: every kernel equals, bit for bit, a
// reference written here from the spec (operation order in
// int4_matmul_internal.h, levels and scales from quantize_row) on random
// shapes with ragged panels and K % 32 != 0, with every thread count; the
// result is within the activation quantisation error of the product with
// the dequantised weights; rows are batch invariant; a non-finite
// activation poisons its own row only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "kernels/cpu/int4_matmul_internal.h"
#include "kernels/cpu/int8_matmul_internal.h"
#include "kernels/cpu/quantize.h"

namespace loragate::cpu {
namespace {

using detail::Int8Kernel;

constexpr WeightType kW4A8Types[] = {WeightType::kInt4, WeightType::kInt4G64, WeightType::kInt4Asym,
                                     WeightType::kInt4AsymG64};

std::vector<float> w4_weights(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 0.05f);
  std::uniform_int_distribution<int> pick(0, 63);
  std::vector<float> w(static_cast<size_t>(n * k));
  for (auto& v : w) v = pick(rng) == 0 ? 8.f * d(rng) : d(rng);
  return w;
}

// Mostly N(0, 1) with some large values; every seventh row is zero.
std::vector<float> a8_activations(int64_t m, int64_t k, int64_t ldx, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(m * ldx), 99.f);  // 99 past K must be ignored
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < k; ++c) x[static_cast<size_t>(r * ldx + c)] = r % 7 == 6 ? 0.f : d(rng) * (c % 13 == 0 ? 20.f : 1.f);
  return x;
}

// The reference, from the spec alone.
std::vector<float> w4a8_reference(WeightType t, const std::vector<float>& w, int64_t n, int64_t k, const float* x,
                             int64_t m, int64_t ldx, int64_t ldy) {
  std::vector<QuantizedRow> rows(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) quantize_row(t, w.data() + j * k, k, rows[static_cast<size_t>(j)]);
  const int64_t group = int4_group(t);
  std::vector<float> y(static_cast<size_t>(m * ldy), -7.f);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      const QuantizedRow& q = rows[static_cast<size_t>(j)];
      float acc = 0;
      for (int64_t k0 = 0; k0 < k; k0 += 32) {
        const int64_t len = std::min<int64_t>(32, k - k0);
        float amax = 0;
        for (int64_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(x[r * ldx + k0 + i]));
        const float sx = amax / 127.0f;
        int32_t dot = 0, sum = 0;
        for (int64_t i = 0; i < len; ++i) {
          const int32_t v = sx > 0 ? static_cast<int32_t>(std::clamp(std::nearbyint(x[r * ldx + k0 + i] / sx), -127.f, 127.f)) : 0;
          dot += v * q.levels[static_cast<size_t>(k0 + i)];
          sum += v;
        }
        const size_t g = static_cast<size_t>(k0 / group);
        const float s = f16_to_f32(q.group_scales[g]);
        const float mn = int4_asymmetric(t) ? f16_to_f32(q.group_mins[g]) : -8.0f * s;
        acc = std::fma(std::fma(static_cast<float>(dot), s, mn * static_cast<float>(sum)), sx, acc);
      }
      y[static_cast<size_t>(r * ldy + j)] = acc;
    }
  }
  return y;
}

std::vector<float> run_w4a8(Int8Kernel kernel, int threads, const float* x, int64_t m, int64_t ldx, const PackedMatrix& w,
                       int64_t ldy) {
  std::vector<float> y(static_cast<size_t>(m * ldy), -7.f);
  detail::matmul_int4_with(kernel, threads, x, m, ldx, w, y.data(), ldy);
  return y;
}

void expect_every_kernel_equals_reference(WeightType t, int64_t m, int64_t n, int64_t k, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << weight_type_name(t) << " M=" << m << " N=" << n << " K=" << k);
  const auto w = w4_weights(n, k, seed);
  const PackedMatrix pm = PackedMatrix::pack(w.data(), DType::kF32, n, k, t);
  const int64_t ldx = k + 3, ldy = n + 5;
  const auto x = a8_activations(m, k, ldx, seed + 1);
  const auto want = w4a8_reference(t, w, n, k, x.data(), m, ldx, ldy);
  for (Int8Kernel kernel : detail::supported_int8_kernels()) {
    for (int threads : {1, 2}) {
      const auto got = run_w4a8(kernel, threads, x.data(), m, ldx, pm, ldy);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
          << detail::int8_kernel_name(kernel) << ", " << threads << " thread(s)";
    }
  }
}

TEST(Int4Matmul, EveryKernelEqualsTheReferenceBitForBit) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int64_t> dn(1, 100), dk(1, 200);
  for (int64_t m = 1; m <= 20; ++m) {
    for (WeightType t : kW4A8Types) expect_every_kernel_equals_reference(t, m, dn(rng), dk(rng), static_cast<uint32_t>(m));
  }
}

TEST(Int4Matmul, LayerShapesEqualTheReference) {
  // Decode and prefill shapes of a real layer: several panels per thread,
  // every tile shape, K a multiple of both groups and not.
  for (WeightType t : kW4A8Types) {
    for (int64_t m : {1, 2, 3, 5, 8, 13, 33}) expect_every_kernel_equals_reference(t, m, 300, 512, 5);
    expect_every_kernel_equals_reference(t, 4, 290, 200, 6);
  }
}

TEST(Int4Matmul, CloseToTheProductWithDequantizedWeights) {
  const int64_t m = 6, n = 64, k = 512;
  for (WeightType t : kW4A8Types) {
    const auto w = w4_weights(n, k, 9);
    const PackedMatrix pm = PackedMatrix::pack(w.data(), DType::kF32, n, k, t);
    const auto x = a8_activations(m, k, k, 10);
    const auto got = run_w4a8(detail::int8_kernel_for(best_isa()), 0, x.data(), m, k, pm, n);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0, bound = 0;
        for (int64_t c = 0; c < k; ++c) {
          const double xv = x[static_cast<size_t>(r * k + c)], wv = pm.at(j, c);
          exact += xv * wv;
          bound += std::fabs(wv);
        }
        // Each x moves by at most half a step of its block: amax / 254 <= max |x| / 254.
        double xmax = 0;
        for (int64_t c = 0; c < k; ++c) xmax = std::max(xmax, std::fabs(double(x[static_cast<size_t>(r * k + c)])));
        EXPECT_NEAR(got[static_cast<size_t>(r * n + j)], exact, bound * xmax / 254 + 1e-4)
            << weight_type_name(t) << " r=" << r << " j=" << j;
      }
    }
  }
}

TEST(Int4Matmul, ARowDoesNotDependOnTheBatch) {
  const int64_t n = 200, k = 300;
  const auto w = w4_weights(n, k, 21);
  const PackedMatrix pm = PackedMatrix::pack(w.data(), DType::kF32, n, k, WeightType::kInt4Asym);
  const auto x = a8_activations(17, k, k, 22);
  for (Int8Kernel kernel : detail::supported_int8_kernels()) {
    const auto all = run_w4a8(kernel, 0, x.data(), 17, k, pm, n);
    for (int64_t r = 0; r < 17; ++r) {
      const auto alone = run_w4a8(kernel, 1, x.data() + r * k, 1, k, pm, n);
      ASSERT_EQ(0, std::memcmp(alone.data(), all.data() + r * n, static_cast<size_t>(n) * sizeof(float)))
          << detail::int8_kernel_name(kernel) << " row " << r;
    }
  }
}

TEST(Int4Matmul, ANonFiniteActivationPoisonsOnlyItsRow) {
  const int64_t n = 40, k = 96;
  const auto w = w4_weights(n, k, 31);
  const PackedMatrix pm = PackedMatrix::pack(w.data(), DType::kF32, n, k, WeightType::kInt4);
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    auto x = a8_activations(3, k, k, 32);
    x[static_cast<size_t>(k + 40)] = bad;  // row 1
    for (Int8Kernel kernel : detail::supported_int8_kernels()) {
      const auto y = run_w4a8(kernel, 1, x.data(), 3, k, pm, n);
      for (int64_t j = 0; j < n; ++j) {
        EXPECT_TRUE(std::isfinite(y[static_cast<size_t>(j)]));
        EXPECT_TRUE(std::isnan(y[static_cast<size_t>(n + j)])) << detail::int8_kernel_name(kernel);
        EXPECT_TRUE(std::isfinite(y[static_cast<size_t>(2 * n + j)]));
      }
    }
  }
}

TEST(Int4Matmul, EmptySumIsZero) {
  const PackedMatrix pm = PackedMatrix::pack(nullptr, DType::kF32, 5, 0, WeightType::kInt4);
  std::vector<float> x(1, 1.f), y(10, -1.f);
  matmul(x.data(), 2, 0, pm, y.data(), 5);
  for (float v : y) EXPECT_EQ(v, 0.f);
}

TEST(Int4Matmul, PublicEntryUsesTheIsaKernel) {
  const int64_t m = 3, n = 70, k = 100;
  const auto w = w4_weights(n, k, 41);
  const PackedMatrix pm = PackedMatrix::pack(w.data(), DType::kF32, n, k, WeightType::kInt4G64);
  const auto x = a8_activations(m, k, k, 42);
  std::vector<float> y(static_cast<size_t>(m * n));
  matmul(x.data(), m, k, pm, y.data(), n);
  const auto want = w4a8_reference(WeightType::kInt4G64, w, n, k, x.data(), m, k, n);
  EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float)));
}

}  // namespace
}  // namespace loragate::cpu
