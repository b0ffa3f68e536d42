// Quantised weight storage (int8 per channel, int4 group-wise): the packed
// values stay within half a quantisation step of the source, and matmul over
// a quantised matrix gives the same bits on every ISA and thread count, close
// to the product with its dequantised values, for every tile shape and
// ragged edge (the integer kernels' own references: int8_matmul_test,
// int4_matmul_test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "common/weight_type.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_internal.h"

namespace loragate::cpu {
namespace {

constexpr WeightType kQuantized[] = {WeightType::kInt8, WeightType::kInt4, WeightType::kInt4G64,
                                     WeightType::kInt4Asym, WeightType::kInt4AsymG64};

// Weights like a trained layer's: mostly small, a few large (outliers in a group).
std::vector<float> layer_like(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 0.05f);
  std::uniform_int_distribution<int> pick(0, 63);
  std::vector<float> v(static_cast<size_t>(n * k));
  for (auto& f : v) f = pick(rng) == 0 ? 8.f * d(rng) : d(rng);
  return v;
}

// The f32 matrix of a packed matrix's dequantised values.
std::vector<float> dequantized(const PackedMatrix& pm) {
  std::vector<float> v(static_cast<size_t>(pm.rows() * pm.cols()));
  for (int64_t r = 0; r < pm.rows(); ++r)
    for (int64_t c = 0; c < pm.cols(); ++c) v[static_cast<size_t>(r * pm.cols() + c)] = pm.at(r, c);
  return v;
}

TEST(QuantizedPack, ValuesWithinHalfAStepOfTheSource) {
  const int64_t n = 70, k = 200;  // ragged last panel; 200 = 6 groups of 32 + 8, 3 of 64 + 8
  const auto w = layer_like(n, k, 1);
  for (WeightType t : kQuantized) {
    SCOPED_TRACE(std::string(weight_type_name(t)));
    const PackedMatrix pm = PackedMatrix::pack(w.data(), DType::kF32, n, k, t);
    EXPECT_EQ(pm.storage(), t);
    const int64_t group = t == WeightType::kInt8 ? k : int4_group(t);
    double sum_err = 0;
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t g0 = 0; g0 < k; g0 += group) {
        const int64_t g1 = std::min(k, g0 + group);
        float lo = INFINITY, hi = -INFINITY, amax = 0;
        for (int64_t c = g0; c < g1; ++c) {
          const float v = w[static_cast<size_t>(r * k + c)];
          lo = std::min(lo, v), hi = std::max(hi, v), amax = std::max(amax, std::fabs(v));
        }
        // Step of the grid; f16 scales and minimums add a relative 2^-11 each.
        const double step = t == WeightType::kInt8 ? amax / 127.0 : int4_asymmetric(t) ? (hi - lo) / 15.0 : amax / 7.0;
        const double tol = 0.5 * step * (1 + 1e-3) + (is_int4(t) ? 16 * amax * std::ldexp(1.0, -11) : 1e-7 * amax);
        for (int64_t c = g0; c < g1; ++c) {
          const double err = std::fabs(pm.at(r, c) - w[static_cast<size_t>(r * k + c)]);
          sum_err += err;
          ASSERT_LE(err, tol) << "row " << r << " col " << c;
        }
      }
    }
    EXPECT_GT(sum_err, 0) << "nothing was rounded: not quantised";
  }
}

TEST(QuantizedPack, BytesFollowTheLayout) {
  const int64_t n = 70, k = 200, panels = 3;
  const auto w = layer_like(n, k, 2);
  EXPECT_EQ(PackedMatrix::pack(w.data(), DType::kF32, n, k, WeightType::kInt8).bytes(),
            size_t(panels * (128 + 50 * 128)));
  EXPECT_EQ(PackedMatrix::pack(w.data(), DType::kF32, n, k, WeightType::kInt4).bytes(),
            size_t(panels * 7 * (64 + 16 * 32)));
  EXPECT_EQ(PackedMatrix::pack(w.data(), DType::kF32, n, k, WeightType::kInt4AsymG64).bytes(),
            size_t(panels * 4 * (128 + 16 * 64)));
  EXPECT_EQ(PackedMatrix::pack(w.data(), DType::kF32, n, k, WeightType::kInt4G64).bytes(),
            size_t(panels * 4 * (64 + 16 * 64)));
  EXPECT_EQ(PackedMatrix::pack(w.data(), DType::kF32, n, k, WeightType::kInt4Asym).bytes(),
            size_t(panels * 7 * (128 + 16 * 32)));
  EXPECT_EQ(PackedMatrix::pack(w.data(), DType::kF32, n, k, WeightType::kInt8Outlier).bytes(),
            size_t(panels * (128 + 50 * 128)));
  // What a memory estimate counts without packing.
  EXPECT_EQ(PackedMatrix::bytes_for(n, k, WeightType::kInt4AsymG64), size_t(panels * 4 * (128 + 16 * 64)));
  EXPECT_EQ(PackedMatrix::bytes_for(n, k, WeightType::kInt8), size_t(panels * (128 + 50 * 128)));
}

TEST(QuantizedPack, ZeroRowsStayZeroAndInt8HitsItsExtremesExactly) {
  const int64_t n = 3, k = 64;
  std::vector<float> w(static_cast<size_t>(n * k), 0.f);
  for (int64_t c = 0; c < k; ++c) w[static_cast<size_t>(k + c)] = 0.25f;  // row 1 constant
  for (int64_t c = 0; c < k; ++c) w[static_cast<size_t>(2 * k + c)] = c % 2 ? -1.f : 1.f;
  for (WeightType t : kQuantized) {
    const PackedMatrix pm = PackedMatrix::pack(w.data(), DType::kF32, n, k, t);
    for (int64_t c = 0; c < k; ++c) EXPECT_EQ(pm.at(0, c), 0.f) << weight_type_name(t);
  }
  const PackedMatrix pm = PackedMatrix::pack(w.data(), DType::kF32, n, k, WeightType::kInt8);
  for (int64_t c = 0; c < k; ++c) {
    EXPECT_EQ(pm.at(1, c), 0.25f);
    EXPECT_EQ(pm.at(2, c), w[static_cast<size_t>(2 * k + c)]);
  }
}

// matmul over quantised storage runs integer dot products (int8: W8A8 with
// a scale per activation row; int4: W4A8 with a scale per block of 32): the
// same bits on every ISA and thread count, for the shapes every ISA's tiling
// makes, and within half an activation step of the product with the
// dequantised weights.
void expect_isas_agree_and_close(WeightType t, int64_t m, int64_t n, int64_t k, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << weight_type_name(t) << " M=" << m << " N=" << n << " K=" << k);
  const auto w = layer_like(n, k, seed);
  const PackedMatrix q = PackedMatrix::pack(w.data(), DType::kF32, n, k, t);
  const auto deq = dequantized(q);
  std::mt19937 rng(seed + 1);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  const int64_t ldx = k + 1, ldy = n + 3;
  std::vector<float> x(static_cast<size_t>(m * ldx));
  for (size_t i = 0; i < x.size(); ++i) x[i] = d(rng) * (i % 5 == 0 ? 300.f : 1.f);
  std::vector<float> want(static_cast<size_t>(m * ldy), -7.f);
  detail::matmul_with(Isa::kScalar, 1, x.data(), m, ldx, q, want.data(), ldy);
  for (Isa isa : supported_isas()) {
    for (int threads : {1, 2}) {
      std::vector<float> got(want.size(), -7.f);
      detail::matmul_with(isa, threads, x.data(), m, ldx, q, got.data(), ldy);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
          << isa_name(isa) << ", " << threads << " thread(s)";
    }
  }
  for (int64_t r = 0; r < m; ++r) {
    double xmax = 0;
    for (int64_t c = 0; c < k; ++c) xmax = std::max(xmax, std::fabs(double(x[static_cast<size_t>(r * ldx + c)])));
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0, wsum = 0;
      for (int64_t c = 0; c < k; ++c) {
        exact += double(x[static_cast<size_t>(r * ldx + c)]) * deq[static_cast<size_t>(j * k + c)];
        wsum += std::fabs(deq[static_cast<size_t>(j * k + c)]);
      }
      ASSERT_NEAR(want[static_cast<size_t>(r * ldy + j)], exact, wsum * xmax / 254 * (1 + 1e-3) + 1e-3)
          << "row " << r << " col " << j;
    }
  }
}

TEST(QuantizedMatmul, EveryIsaAgreesAndStaysCloseToTheDequantizedProduct) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int64_t> dn(1, 100), dk(1, 150);
  for (int64_t m = 1; m <= 40; ++m) {
    for (WeightType t : kQuantized) expect_isas_agree_and_close(t, m, dn(rng), dk(rng), static_cast<uint32_t>(m));
  }
  // Decode and prefill shapes of a real layer, K a multiple of every group.
  for (WeightType t : kQuantized)
    for (int64_t m : {1, 2, 3, 8, 16, 64}) expect_isas_agree_and_close(t, m, 300, 512, 5);
}

}  // namespace
}  // namespace loragate::cpu
