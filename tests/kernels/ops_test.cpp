// The element-wise ops and paged attention against plain double-precision references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/paged_attention.h"
#include "tests/kernels/attention_reference.h"

namespace loragate::cpu {
namespace {

std::vector<float> random_vec(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(OpsTest, RmsNormMatchesReference) {
  std::mt19937 rng(1);
  const int64_t tokens = 3, dim = 67;
  auto x = random_vec(tokens * dim, rng, 3.0f), w = random_vec(dim, rng);
  std::vector<float> y(x.size());
  rmsnorm(x.data(), w.data(), y.data(), tokens, dim, 1e-5f);
  for (int64_t t = 0; t < tokens; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double(x[t * dim + i]) * x[t * dim + i];
    const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int64_t i = 0; i < dim; ++i) EXPECT_NEAR(y[t * dim + i], x[t * dim + i] * inv * w[i], 1e-5);
  }
}

TEST(OpsTest, RopeRotatesHalvesAndPreservesNorm) {
  std::mt19937 rng(2);
  const int64_t tokens = 2, heads = 3, d = 8, stride = heads * d + 5;
  auto x = random_vec(tokens * stride, rng);
  auto orig = x;
  std::vector<float> cos(tokens * d / 2), sin(tokens * d / 2);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < d / 2; ++j) {
      const double angle = (t + 3) * std::pow(10000.0, -2.0 * j / d);
      cos[t * d / 2 + j] = static_cast<float>(std::cos(angle));
      sin[t * d / 2 + j] = static_cast<float>(std::sin(angle));
    }
  }
  rope_rotate_half(x.data(), tokens, heads, d, stride, cos.data(), sin.data());
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* a = orig.data() + t * stride + h * d;
      const float* b = x.data() + t * stride + h * d;
      for (int64_t j = 0; j < d / 2; ++j) {
        const float c = cos[t * d / 2 + j], s = sin[t * d / 2 + j];
        EXPECT_NEAR(b[j], a[j] * c - a[j + d / 2] * s, 1e-6);
        EXPECT_NEAR(b[j + d / 2], a[j + d / 2] * c + a[j] * s, 1e-6);
      }
    }
    for (int64_t i = heads * d; i < stride; ++i) EXPECT_EQ(x[t * stride + i], orig[t * stride + i]) << "padding touched";
  }
}

TEST(OpsTest, SiluMulAndArgmax) {
  std::vector<float> gu = {1.0f, -2.0f, 3.0f, 0.5f};  // gate {1, -2}, up {3, 0.5}
  std::vector<float> out(2);
  silu_mul(gu.data(), out.data(), 1, 2);
  EXPECT_NEAR(out[0], 1.0 / (1.0 + std::exp(-1.0)) * 3.0, 1e-6);
  EXPECT_NEAR(out[1], -2.0 / (1.0 + std::exp(2.0)) * 0.5, 1e-6);
  std::vector<float> v = {1.0f, 7.0f, 7.0f, -1.0f};
  EXPECT_EQ(argmax(v.data(), 4), 1);
}

TEST(PagedAttentionTest, MatchesDenseReferenceOverShuffledBlocks) {
  std::mt19937 rng(3);
  for (int64_t d : {8, 16, 64, 72}) {
    for (auto [heads, kv_heads] : {std::pair<int64_t, int64_t>{4, 4}, {8, 2}, {6, 1}}) {
      const int64_t bs = 4, num_blocks = 12, ctx = 37;
      const int64_t row = kv_heads * d;
      std::vector<float> kc(num_blocks * bs * row), vc(kc.size());
      std::vector<int32_t> table(num_blocks);
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), rng);
      std::vector<std::vector<float>> k_tok, v_tok;
      for (int64_t p = 0; p < ctx; ++p) {
        k_tok.push_back(random_vec(row, rng));
        v_tok.push_back(random_vec(row, rng));
        const int64_t slot = table[p / bs] * bs + p % bs;
        std::copy(k_tok[p].begin(), k_tok[p].end(), kc.begin() + slot * row);
        std::copy(v_tok[p].begin(), v_tok[p].end(), vc.begin() + slot * row);
      }
      const PagedKv kv{kc.data(), vc.data(), bs, kv_heads, d};
      auto q = random_vec(heads * d, rng, 2.0f);
      std::vector<float> out(heads * d), scratch(ctx);
      for (auto [first, last] : {std::pair<int64_t, int64_t>{0, ctx - 1}, {0, 0}, {20, ctx - 1}, {5, 17}}) {
        paged_attention_one(q.data(), out.data(), heads, kv, table.data(), first, last, scratch.data());
        const auto ref = reference_attention(q, k_tok, v_tok, heads, kv_heads, d, first, last);
        for (size_t i = 0; i < out.size(); ++i) {
          ASSERT_NEAR(out[i], ref[i], 1e-5) << "d=" << d << " heads=" << heads << "/" << kv_heads << " range ["
                                            << first << "," << last << "] i=" << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace loragate::cpu
