// Every element-wise, reduction and attention kernel of ops_internal.h on
// every ISA this CPU runs: bit-identical to the scalar path, and close to a
// double-precision reference with the tolerance each states, over every
// length 0..300 (so every tail of a 16- or 32-lane block), odd shapes,
// unaligned pointers, and batches of tokens (each token's result equal to the
// same token alone: batch invariance).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/ops_internal.h"
#include "tests/kernels/attention_reference.h"
#include "tests/kernels/float_bits.h"

namespace loragate::cpu::detail {
namespace {

constexpr double kUlp1 = 0x1p-23;  // float ulp at 1: the tolerances below are multiples of it

std::vector<float> random_floats(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

// The first element where `got` differs from the scalar path's `want`.
::testing::AssertionResult same_bits(const std::vector<float>& want, const std::vector<float>& got) {
  if (want.size() != got.size()) {
    return ::testing::AssertionFailure() << "sizes " << want.size() << " vs " << got.size();
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (!same(want[i], got[i])) {
      return ::testing::AssertionFailure() << "element " << i << " is " << got[i] << " (0x" << std::hex
                                           << std::bit_cast<uint32_t>(got[i]) << "), scalar gives " << want[i]
                                           << " (0x" << std::bit_cast<uint32_t>(want[i]) << ")" << std::dec;
    }
  }
  return ::testing::AssertionSuccess();
}

// The vector ISAs this CPU runs (each is compared against scalar).
std::vector<Isa> vector_isas() {
  std::vector<Isa> isas = supported_isas();
  isas.erase(std::remove(isas.begin(), isas.end(), Isa::kScalar), isas.end());
  return isas;
}

const CpuOps& scalar() { return ops_for(Isa::kScalar); }

TEST(OpsIsaTest, VecDotIsExactAcrossIsasAndAccurate) {
  std::mt19937 rng(11);
  std::vector<int64_t> lengths(301);
  std::iota(lengths.begin(), lengths.end(), 0);
  lengths.insert(lengths.end(), {511, 1000, 4099});
  for (int64_t n : lengths) {
    // One float into the allocation: unaligned for every vector width.
    const auto a = random_floats(n + 1, rng), b = random_floats(n + 1, rng);
    const float* ap = a.data() + 1;
    const float* bp = b.data() + 1;
    double ref = 0, magnitude = 0;
    for (int64_t j = 0; j < n; ++j) ref += double(ap[j]) * bp[j], magnitude += std::fabs(double(ap[j]) * bp[j]);
    const float want = scalar().vec_dot(ap, bp, n);
    // One rounding per step of a lane's chain, the lane combine and the 4-level fold.
    const double tol = (double(n) / 32 + 6) * kUlp1 / 2 * magnitude;
    EXPECT_NEAR(want, ref, tol) << "n=" << n;
    for (Isa isa : vector_isas()) {
      EXPECT_TRUE(same(ops_for(isa).vec_dot(ap, bp, n), want)) << isa_name(isa) << " n=" << n;
    }
  }
}

TEST(OpsIsaTest, VecAxpyIsOneFmaPerElementOnEveryIsa) {
  std::mt19937 rng(12);
  for (int64_t n = 0; n <= 300; ++n) {
    const auto x = random_floats(n + 1, rng);
    const auto y0 = random_floats(n + 2, rng);
    const float p = random_floats(1, rng, -3.0f, 3.0f)[0];
    std::vector<float> want = y0;
    for (int64_t j = 0; j < n; ++j) want[j + 1] = std::fma(p, x[j + 1], y0[j + 1]);  // the contract, exactly
    for (Isa isa : supported_isas()) {
      std::vector<float> y = y0;
      ops_for(isa).vec_axpy(p, x.data() + 1, y.data() + 1, n);
      EXPECT_TRUE(same_bits(want, y)) << isa_name(isa) << " n=" << n;  // and the last element is untouched
    }
  }
}

TEST(OpsIsaTest, AddInplaceAndAddBiasAreOneAddPerElement) {
  std::mt19937 rng(13);
  for (int64_t n = 0; n <= 300; ++n) {
    const auto x = random_floats(n + 1, rng, -100.0f, 100.0f);
    const auto y0 = random_floats(n + 2, rng);
    std::vector<float> want = y0;
    for (int64_t j = 0; j < n; ++j) want[j + 1] = y0[j + 1] + x[j + 1];
    for (Isa isa : supported_isas()) {
      std::vector<float> y = y0;
      ops_for(isa).add_inplace(y.data() + 1, x.data() + 1, n);
      EXPECT_TRUE(same_bits(want, y)) << isa_name(isa) << " n=" << n;
    }
  }
  // Rows with padding between them: the padding is never touched.
  const int64_t tokens = 3, dim = 37, stride = 41;
  const auto b = random_floats(dim, rng);
  const auto x0 = random_floats(tokens * stride, rng);
  std::vector<float> want = x0;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t i = 0; i < dim; ++i) want[t * stride + i] = x0[t * stride + i] + b[i];
  for (Isa isa : supported_isas()) {
    std::vector<float> x = x0;
    ops_for(isa).add_bias(x.data(), b.data(), tokens, dim, stride);
    EXPECT_TRUE(same_bits(want, x)) << isa_name(isa);
  }
}

TEST(OpsIsaTest, RmsNormIsExactAcrossIsasBatchInvariantAndAccurate) {
  std::mt19937 rng(14);
  const float eps = 1e-5f;
  for (int64_t dim = 1; dim <= 300; ++dim) {
    const int64_t tokens = 1 + dim % 4;
    const auto x = random_floats(tokens * dim, rng, -3.0f, 3.0f);
    const auto w = random_floats(dim, rng);
    std::vector<float> want(x.size());
    scalar().rmsnorm(x.data(), w.data(), want.data(), tokens, dim, eps);
    for (int64_t t = 0; t < tokens; ++t) {
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += double(x[t * dim + i]) * x[t * dim + i];
      const double inv = 1.0 / std::sqrt(ss / double(dim) + eps);
      for (int64_t i = 0; i < dim; ++i) {
        const double ref = x[t * dim + i] * inv * w[i];
        ASSERT_NEAR(want[t * dim + i], ref, 16 * kUlp1 * std::fabs(ref) + 1e-30) << "dim=" << dim << " i=" << i;
      }
    }
    for (Isa isa : supported_isas()) {
      const CpuOps& ops = ops_for(isa);
      std::vector<float> got(x.size());
      ops.rmsnorm(x.data(), w.data(), got.data(), tokens, dim, eps);
      EXPECT_TRUE(same_bits(want, got)) << isa_name(isa) << " dim=" << dim;
      std::vector<float> in_place = x;  // y may alias x
      ops.rmsnorm(in_place.data(), w.data(), in_place.data(), tokens, dim, eps);
      EXPECT_TRUE(same_bits(want, in_place)) << isa_name(isa) << " in place, dim=" << dim;
      std::vector<float> alone(x.size());
      for (int64_t t = 0; t < tokens; ++t) {
        ops.rmsnorm(x.data() + t * dim, w.data(), alone.data() + t * dim, 1, dim, eps);
      }
      EXPECT_TRUE(same_bits(want, alone)) << isa_name(isa) << " one token at a time, dim=" << dim;
    }
  }
}

TEST(OpsIsaTest, RopeIsExactAcrossIsasBatchInvariantAndAccurate) {
  std::mt19937 rng(15);
  for (int64_t half = 1; half <= 150; ++half) {
    const int64_t d = 2 * half, heads = 1 + half % 3, tokens = 2, stride = heads * d + 3;
    const auto x0 = random_floats(tokens * stride, rng, -2.0f, 2.0f);
    std::vector<float> cos(tokens * half), sin(tokens * half);
    for (int64_t i = 0; i < tokens * half; ++i) {
      const double angle = random_floats(1, rng, -6.3f, 6.3f)[0];
      cos[i] = static_cast<float>(std::cos(angle));
      sin[i] = static_cast<float>(std::sin(angle));
    }
    std::vector<float> want = x0;
    scalar().rope_rotate_half(want.data(), tokens, heads, d, stride, cos.data(), sin.data());
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        const float* v0 = x0.data() + t * stride + h * d;
        const float* v = want.data() + t * stride + h * d;
        for (int64_t j = 0; j < half; ++j) {
          const double c = cos[t * half + j], s = sin[t * half + j], a = v0[j], b = v0[j + half];
          // Two rounded products and their rounded sum.
          ASSERT_NEAR(v[j], a * c - b * s, kUlp1 * (std::fabs(a * c) + std::fabs(b * s))) << "d=" << d;
          ASSERT_NEAR(v[j + half], b * c + a * s, kUlp1 * (std::fabs(b * c) + std::fabs(a * s))) << "d=" << d;
        }
      }
      for (int64_t i = heads * d; i < stride; ++i) ASSERT_EQ(want[t * stride + i], x0[t * stride + i]) << "padding";
    }
    for (Isa isa : supported_isas()) {
      const CpuOps& ops = ops_for(isa);
      std::vector<float> got = x0;
      ops.rope_rotate_half(got.data(), tokens, heads, d, stride, cos.data(), sin.data());
      EXPECT_TRUE(same_bits(want, got)) << isa_name(isa) << " d=" << d;
      std::vector<float> alone = x0;
      for (int64_t t = 0; t < tokens; ++t) {
        ops.rope_rotate_half(alone.data() + t * stride, 1, heads, d, stride, cos.data() + t * half,
                             sin.data() + t * half);
      }
      EXPECT_TRUE(same_bits(want, alone)) << isa_name(isa) << " one token at a time, d=" << d;
    }
  }
}

TEST(OpsIsaTest, SiluMulIsExactAcrossIsasBatchInvariantAndAccurate) {
  std::mt19937 rng(16);
  for (int64_t inter = 1; inter <= 300; ++inter) {
    const int64_t tokens = 1 + inter % 3;
    const auto gate_up = random_floats(tokens * 2 * inter, rng, -12.0f, 12.0f);
    std::vector<float> want(tokens * inter);
    scalar().silu_mul(gate_up.data(), want.data(), tokens, inter);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t i = 0; i < inter; ++i) {
        const double g = gate_up[t * 2 * inter + i], u = gate_up[t * 2 * inter + inter + i];
        const double ref = g / (1.0 + std::exp(-g)) * u;
        // exp's 1 ulp, then 1 + e, the division and the product.
        ASSERT_NEAR(want[t * inter + i], ref, 6 * kUlp1 * std::fabs(ref) + 1e-37) << "inter=" << inter << " g=" << g;
      }
    }
    for (Isa isa : supported_isas()) {
      const CpuOps& ops = ops_for(isa);
      std::vector<float> got(want.size());
      ops.silu_mul(gate_up.data(), got.data(), tokens, inter);
      EXPECT_TRUE(same_bits(want, got)) << isa_name(isa) << " inter=" << inter;
      std::vector<float> alone(want.size());
      for (int64_t t = 0; t < tokens; ++t) {
        ops.silu_mul(gate_up.data() + t * 2 * inter, alone.data() + t * inter, 1, inter);
      }
      EXPECT_TRUE(same_bits(want, alone)) << isa_name(isa) << " one token at a time, inter=" << inter;
    }
  }
}

// The lowest index of the largest non-NaN value; 0 when none is above -inf.
int64_t reference_argmax(const std::vector<float>& x) {
  int64_t best = 0;
  float top = -kInf;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] > top) top = x[i], best = static_cast<int64_t>(i);
  }
  return best;
}

TEST(OpsIsaTest, ArgmaxFindsTheFirstLargestOnEveryIsa) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> coin(0, 3);
  for (int64_t n = 1; n <= 300; ++n) {
    for (int variant = 0; variant < 4; ++variant) {
      // Coarse values so that ties are common; then the largest repeated, NaNs, -infs.
      std::vector<float> x = random_floats(n, rng, -8.0f, 8.0f);
      for (float& v : x) v = std::round(v);
      std::uniform_int_distribution<int64_t> at(0, n - 1);
      if (variant >= 1) x[at(rng)] = 9.0f, x[at(rng)] = 9.0f;
      if (variant >= 2) x[at(rng)] = kNaN, x[at(rng)] = -kInf;
      if (variant == 3 && coin(rng) == 0) std::fill(x.begin(), x.end(), -kInf), x[at(rng)] = kNaN;
      for (Isa isa : supported_isas()) {
        EXPECT_EQ(ops_for(isa).argmax(x.data(), n), reference_argmax(x)) << isa_name(isa) << " n=" << n;
      }
    }
  }
  const std::vector<std::vector<float>> cases = {
      {-kInf, -kInf}, {kNaN, kNaN, kNaN}, {kNaN, 1.0f, 1.0f}, {-0.0f, 0.0f}, {0.0f, -0.0f}, {kNaN, -kInf, 2.0f}};
  for (const auto& x : cases) {
    for (Isa isa : supported_isas()) {
      EXPECT_EQ(ops_for(isa).argmax(x.data(), static_cast<int64_t>(x.size())), reference_argmax(x)) << isa_name(isa);
    }
  }
}

TEST(OpsIsaTest, SoftmaxNumeratorsAreExactAcrossIsasAndAccurate) {
  std::mt19937 rng(18);
  for (int64_t n = 1; n <= 300; ++n) {
    const auto s0 = random_floats(n, rng, -30.0f, 30.0f);
    std::vector<float> want = s0;
    const float sum = scalar().softmax_numerators(want.data(), n);
    const float top = *std::max_element(s0.begin(), s0.end());
    double ref_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      // The shift is one float subtraction, rounded as in any f32 softmax;
      // what is checked is the exp of it (1 ulp, with slack) and the sum.
      const double ref = std::exp(double(s0[i] - top));
      ASSERT_NEAR(want[i], ref, 2 * kUlp1 * ref + 1e-44) << "n=" << n << " i=" << i;
      ref_sum += want[i];
    }
    EXPECT_NEAR(sum, ref_sum, (double(n) / 16 + 5) * kUlp1 / 2 * ref_sum) << "n=" << n;
    for (Isa isa : vector_isas()) {
      std::vector<float> got = s0;
      EXPECT_TRUE(same(ops_for(isa).softmax_numerators(got.data(), n), sum)) << isa_name(isa) << " n=" << n;
      EXPECT_TRUE(same_bits(want, got)) << isa_name(isa) << " n=" << n;
    }
  }
}

TEST(OpsIsaTest, PagedAttentionIsExactAcrossIsasAndAccurate) {
  std::mt19937 rng(19);
  for (int64_t d : {1, 7, 16, 17, 33, 64, 72, 130}) {
    for (auto [heads, kv_heads] : {std::pair<int64_t, int64_t>{4, 4}, {6, 2}, {3, 1}}) {
      for (int64_t bs : {1, 5, 16}) {
        const int64_t ctx = 1 + (d * 7 + heads * 3 + bs) % 70;
        const int64_t num_blocks = (ctx + bs - 1) / bs, row = kv_heads * d;
        std::vector<float> kc(num_blocks * bs * row), vc(kc.size());
        std::vector<int32_t> table(num_blocks);
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), rng);
        std::vector<std::vector<float>> k_tok, v_tok;
        for (int64_t p = 0; p < ctx; ++p) {
          k_tok.push_back(random_floats(row, rng));
          v_tok.push_back(random_floats(row, rng));
          const int64_t slot = table[p / bs] * bs + p % bs;
          std::copy(k_tok[p].begin(), k_tok[p].end(), kc.begin() + slot * row);
          std::copy(v_tok[p].begin(), v_tok[p].end(), vc.begin() + slot * row);
        }
        const PagedKv kv{kc.data(), vc.data(), bs, kv_heads, d};
        const auto q = random_floats(heads * d, rng, -2.0f, 2.0f);
        for (auto [first, last] : {std::pair<int64_t, int64_t>{0, ctx - 1}, {0, 0}, {ctx / 2, ctx - 1}}) {
          std::vector<float> want(heads * d), scratch(ctx);
          scalar().paged_attention_one(q.data(), want.data(), heads, kv, table.data(), first, last, scratch.data());
          const auto ref = reference_attention(q, k_tok, v_tok, heads, kv_heads, d, first, last);
          for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_NEAR(want[i], ref[i], 1e-5) << "d=" << d << " heads=" << heads << "/" << kv_heads << " bs=" << bs
                                               << " [" << first << "," << last << "] i=" << i;
          }
          for (Isa isa : vector_isas()) {
            std::vector<float> got(want.size());
            ops_for(isa).paged_attention_one(q.data(), got.data(), heads, kv, table.data(), first, last,
                                             scratch.data());
            EXPECT_TRUE(same_bits(want, got)) << isa_name(isa) << " d=" << d << " heads=" << heads << "/" << kv_heads
                                              << " bs=" << bs << " [" << first << "," << last << "]";
          }
        }
      }
    }
  }
}

TEST(OpsIsaTest, ThePublicFunctionsUseTheBestIsasTable) {
  EXPECT_EQ(&ops(), &ops_for(best_isa()));
  for (Isa isa : supported_isas()) EXPECT_NE(ops_for(isa).vec_dot, nullptr) << isa_name(isa);
}

}  // namespace
}  // namespace loragate::cpu::detail
