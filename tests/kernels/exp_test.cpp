// The exp that silu_mul and the attention's softmax use (lane_kernels.h): its
// error over the whole float range against double-precision exp, its special
// values, the same bits on every ISA and every tail length, and the silu and
// softmax edge cases that follow from it.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/ops_internal.h"
#include "tests/kernels/float_bits.h"

namespace loragate::cpu::detail {
namespace {

float exp_on(Isa isa, float x) {
  float y;
  ops_for(isa).exp(&x, &y, 1);
  return y;
}

// The float ulp at the float nearest `v` (v >= 0), the subnormal spacing below FLT_MIN.
double ulp_at(double v) {
  if (v < FLT_MIN) return 0x1p-149;
  return std::ldexp(1.0, std::ilogb(static_cast<float>(v)) - 23);
}

// Inputs over the whole range where e^x is neither +inf nor 0, denser near 0
// (where the polynomial alone decides), plus random ones.
std::vector<float> sweep_inputs() {
  std::vector<float> x;
  const int steps = 1 << 20;
  for (int i = 0; i <= steps; ++i) x.push_back(static_cast<float>(-104.0 + 193.0 * i / steps));
  for (int i = -(1 << 16); i <= (1 << 16); ++i) x.push_back(static_cast<float>(0.5 * i / (1 << 16)));
  for (float tiny = 1e-38f; tiny < 1e-3f; tiny *= 3.7f) x.push_back(tiny), x.push_back(-tiny);
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> d(-104.0f, 89.0f);
  for (int i = 0; i < (1 << 18); ++i) x.push_back(d(rng));
  return x;
}

TEST(ExpTest, WithinOneUlpOfDoubleExpEverywhere) {
  const std::vector<float> x = sweep_inputs();
  std::vector<float> want(x.size());
  ops_for(Isa::kScalar).exp(x.data(), want.data(), static_cast<int64_t>(x.size()));
  double worst = 0;
  float worst_at = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = std::exp(double(x[i]));
    if (ref > FLT_MAX) {  // rounds to +inf, or to FLT_MAX right at the edge
      EXPECT_TRUE(std::isinf(want[i]) || want[i] == FLT_MAX) << "x=" << x[i] << " gives " << want[i];
      continue;
    }
    const double err = std::fabs(want[i] - ref) / ulp_at(ref);
    if (err > worst) worst = err, worst_at = x[i];
  }
  // 0.94 ulp is the worst over every float (an exhaustive run, too slow for a test).
  EXPECT_LE(worst, 1.0) << "worst at x=" << worst_at;
  std::printf("exp: worst error %.3f ulp, at x = %.9g, over %zu inputs\n", worst, worst_at, x.size());
  for (Isa isa : supported_isas()) {
    std::vector<float> got(x.size());
    ops_for(isa).exp(x.data(), got.data(), static_cast<int64_t>(x.size()));
    size_t differ = 0;
    for (size_t i = 0; i < x.size(); ++i) differ += !same(got[i], want[i]);
    EXPECT_EQ(differ, 0u) << isa_name(isa) << " differs from scalar on " << differ << " inputs";
  }
}

TEST(ExpTest, SpecialValues) {
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    EXPECT_EQ(exp_on(isa, 0.0f), 1.0f);
    EXPECT_EQ(exp_on(isa, -0.0f), 1.0f);
    EXPECT_EQ(exp_on(isa, 1e-30f), 1.0f);
    EXPECT_EQ(exp_on(isa, kInf), kInf);
    EXPECT_EQ(std::bit_cast<uint32_t>(exp_on(isa, -kInf)), 0u) << "e^-inf is +0";
    EXPECT_TRUE(std::isnan(exp_on(isa, kNaN)));
    EXPECT_TRUE(std::isnan(exp_on(isa, -kNaN)));
    EXPECT_EQ(exp_on(isa, 1e30f), kInf);
    EXPECT_EQ(exp_on(isa, FLT_MAX), kInf);
    EXPECT_EQ(exp_on(isa, 88.73f), kInf);
    EXPECT_EQ(exp_on(isa, -1e30f), 0.0f);
    EXPECT_EQ(exp_on(isa, -FLT_MAX), 0.0f);
    EXPECT_EQ(exp_on(isa, -104.0f), 0.0f);
    // The largest finite results, the smallest normal ones, and subnormals
    // (within the subnormal spacing: the one rounding there is the last).
    for (float x : {88.72f, 88.5f, 1.0f, -1.0f, -87.33f, -87.4f, -95.0f, -100.0f, -103.0f, -103.9f}) {
      const double ref = std::exp(double(x));
      EXPECT_NEAR(exp_on(isa, x), ref, 2 * ulp_at(ref)) << "x=" << x;
      EXPECT_TRUE(std::isfinite(exp_on(isa, x))) << "x=" << x;
    }
  }
}

TEST(ExpTest, EveryTailLengthAndAliasingGiveTheSameBits) {
  std::mt19937 rng(22);
  std::uniform_real_distribution<float> d(-30.0f, 30.0f);
  for (Isa isa : supported_isas()) {
    for (int64_t n = 0; n <= 70; ++n) {
      std::vector<float> x(n + 2);
      for (float& v : x) v = d(rng);
      std::vector<float> y(n + 2, -7.0f);
      ops_for(isa).exp(x.data() + 1, y.data() + 1, n);
      for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same(y[i + 1], exp_on(Isa::kScalar, x[i + 1]))) << isa_name(isa);
      EXPECT_EQ(y[0], -7.0f);
      EXPECT_EQ(y[n + 1], -7.0f) << "wrote past the end, n=" << n;
      ops_for(isa).exp(x.data() + 1, x.data() + 1, n);  // in place
      for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same(x[i + 1], y[i + 1])) << isa_name(isa) << " in place";
    }
  }
}

TEST(SiluTest, EdgeCases) {
  const std::vector<float> gates = {0.0f,  -0.0f,  1e-30f, -1e-30f, 1.0f,   -1.0f, 20.0f, -20.0f, 88.0f,
                                    -88.0f, 100.0f, -100.0f, 1e30f,  -1e30f, kInf, -kInf, kNaN};
  const int64_t inter = static_cast<int64_t>(gates.size());
  for (float up : {1.5f, -2.0f}) {
    std::vector<float> gate_up = gates;
    gate_up.resize(2 * inter, up);
    for (Isa isa : supported_isas()) {
      std::vector<float> out(inter);
      ops_for(isa).silu_mul(gate_up.data(), out.data(), 1, inter);
      for (int64_t i = 0; i < inter; ++i) {
        const float g = gates[i];
        SCOPED_TRACE(::testing::Message() << isa_name(isa) << " g=" << g << " up=" << up);
        if (std::isnan(g) || g == -kInf) {
          EXPECT_TRUE(std::isnan(out[i])) << "silu(-inf) = -inf / inf";
        } else if (g == kInf) {
          EXPECT_EQ(out[i], up * kInf);
        } else {
          const double ref = double(g) / (1.0 + std::exp(-double(g))) * up;
          EXPECT_NEAR(out[i], ref, 6 * 0x1p-23 * std::fabs(ref) + 1e-37);
        }
      }
    }
  }
}

TEST(SoftmaxTest, EdgeCases) {
  struct Case {
    std::vector<float> scores;
    std::vector<float> numerators;  // exactly
  };
  const std::vector<Case> cases = {
      {{3.5f}, {1.0f}},
      {{-2.0f, -2.0f, -2.0f}, {1.0f, 1.0f, 1.0f}},
      {{0.0f, 250.0f, -1.0f}, {0.0f, 1.0f, 0.0f}},     // e^-250 underflows to exactly 0
      {{-kInf, 1.0f, -kInf}, {0.0f, 1.0f, 0.0f}},      // masked positions
      {{1e30f, 1e30f, -1e30f}, {1.0f, 1.0f, 0.0f}},
      {std::vector<float>(37, 7.0f), std::vector<float>(37, 1.0f)},
  };
  for (Isa isa : supported_isas()) {
    for (const Case& c : cases) {
      std::vector<float> s = c.scores;
      const float sum = ops_for(isa).softmax_numerators(s.data(), static_cast<int64_t>(s.size()));
      EXPECT_EQ(s, c.numerators) << isa_name(isa);
      EXPECT_EQ(sum, std::accumulate(c.numerators.begin(), c.numerators.end(), 0.0f)) << isa_name(isa);
    }
  }
}

}  // namespace
}  // namespace loragate::cpu::detail
