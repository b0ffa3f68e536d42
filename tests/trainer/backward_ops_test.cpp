// Every backward op against central finite differences of its forward, in f64.
#include "trainer/backward_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

namespace loragate::train {
namespace {

using Vec = std::vector<double>;

Vec random_vec(size_t n, uint32_t seed, double scale = 1.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-scale, scale);
  Vec v(n);
  for (double& x : v) x = u(rng);
  return v;
}

// d/dx of sum(f(x) * weights), by central differences, element by element.
Vec numeric_grad(Vec x, const Vec& weights, const std::function<Vec(const Vec&)>& f) {
  const double h = 1e-6;
  Vec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const Vec up = f(x);
    x[i] = keep - h;
    const Vec down = f(x);
    x[i] = keep;
    double d = 0;
    for (size_t j = 0; j < up.size(); ++j) d += (up[j] - down[j]) * weights[j];
    g[i] = d / (2 * h);
  }
  return g;
}

void expect_close(const Vec& analytic, const Vec& numeric, double tol = 1e-6) {
  ASSERT_EQ(analytic.size(), numeric.size());
  double worst = 0;
  for (size_t i = 0; i < analytic.size(); ++i) worst = std::max(worst, std::abs(analytic[i] - numeric[i]));
  double scale = 0;
  for (double x : numeric) scale = std::max(scale, std::abs(x));
  EXPECT_GT(scale, 1e-3) << "a gradient of zeros checks nothing";
  EXPECT_LT(worst, tol * std::max(1.0, scale)) << "largest difference against finite differences";
}

TEST(BackwardOps, RmsNorm) {
  const int64_t rows = 3, dim = 8;
  const Vec x = random_vec(rows * dim, 1);
  const Vec dy = random_vec(rows * dim, 2);
  std::vector<float> w(dim);
  for (int64_t i = 0; i < dim; ++i) w[static_cast<size_t>(i)] = 0.5f + 0.1f * static_cast<float>(i);
  const double eps = 1e-5;
  auto forward = [&](const Vec& in) {
    Vec y(in.size());
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += in[r * dim + i] * in[r * dim + i];
      const double inv = 1 / std::sqrt(ss / dim + eps);
      for (int64_t i = 0; i < dim; ++i) y[r * dim + i] = in[r * dim + i] * inv * w[i];
    }
    return y;
  };
  Vec dx(x.size());
  rmsnorm_backward(x.data(), w.data(), dy.data(), dx.data(), rows, dim, eps);
  expect_close(dx, numeric_grad(x, dy, forward));
}

TEST(BackwardOps, RopeIsTheTransposedRotation) {
  const int64_t rows = 4, heads = 2, head_dim = 6, stride = heads * head_dim, half = head_dim / 2;
  std::vector<float> cos(rows * half), sin(rows * half);
  for (int64_t i = 0; i < rows * half; ++i) {
    cos[i] = static_cast<float>(std::cos(0.3 * i + 0.1));
    sin[i] = static_cast<float>(std::sin(0.3 * i + 0.1));
  }
  const Vec x = random_vec(rows * stride, 3);
  const Vec dy = random_vec(rows * stride, 4);
  auto forward = [&](const Vec& in) {
    Vec y = in;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t j = 0; j < half; ++j) {
          const double a = in[r * stride + h * head_dim + j], b = in[r * stride + h * head_dim + j + half];
          y[r * stride + h * head_dim + j] = a * cos[r * half + j] - b * sin[r * half + j];
          y[r * stride + h * head_dim + j + half] = b * cos[r * half + j] + a * sin[r * half + j];
        }
    return y;
  };
  Vec dx = dy;
  rope_backward(dx.data(), rows, heads, head_dim, stride, cos.data(), sin.data());
  expect_close(dx, numeric_grad(x, dy, forward));
}

TEST(BackwardOps, SiluMul) {
  const int64_t rows = 3, inter = 5;
  const Vec gu = random_vec(rows * 2 * inter, 5, 4.0);
  const Vec dout = random_vec(rows * inter, 6);
  auto forward = [&](const Vec& in) {
    Vec y(rows * inter);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < inter; ++i) {
        const double g = in[r * 2 * inter + i], u = in[r * 2 * inter + inter + i];
        y[r * inter + i] = g / (1 + std::exp(-g)) * u;
      }
    return y;
  };
  Vec dgu(gu.size());
  silu_mul_backward(gu.data(), dout.data(), dgu.data(), rows, inter);
  expect_close(dgu, numeric_grad(gu, dout, forward));
}

// q, k, v packed in one [n, q + 2 kv] row, as the trainer lays them out.
void check_attention(int64_t n, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t window) {
  const int64_t q_out = heads * head_dim, kv_out = kv_heads * head_dim, width = q_out + 2 * kv_out;
  const AttentionShape s{n, heads, kv_heads, head_dim, window, width, width, width, q_out};
  const Vec qkv = random_vec(n * width, 7, 1.5);
  const Vec dout = random_vec(n * q_out, 8);
  auto forward = [&](const Vec& in) {
    Vec out(n * q_out), probs(n * n);
    for (int64_t h = 0; h < heads; ++h)
      attention_head_forward(s, h, in.data(), in.data() + q_out, in.data() + q_out + kv_out, out.data(), probs.data());
    return out;
  };
  Vec d(qkv.size(), 0.0), probs(n * n), dprobs(n * n);
  for (int64_t h = 0; h < heads; ++h)
    attention_head_backward(s, h, qkv.data(), qkv.data() + q_out, qkv.data() + q_out + kv_out, dout.data(), d.data(),
                            d.data() + q_out, d.data() + q_out + kv_out, probs.data(), dprobs.data());
  expect_close(d, numeric_grad(qkv, dout, forward));
}

TEST(BackwardOps, CausalAttention) { check_attention(5, 2, 2, 4, 0); }
TEST(BackwardOps, GroupedQueryAttention) { check_attention(6, 4, 2, 4, 0); }
TEST(BackwardOps, SlidingWindowAttention) { check_attention(7, 4, 1, 2, 3); }

TEST(BackwardOps, AttentionIsCausal) {
  // Changing the last token's k and v must not change earlier outputs.
  const int64_t n = 4, heads = 2, head_dim = 2, width = 3 * heads * head_dim;
  const AttentionShape s{n, heads, heads, head_dim, 0, width, width, width, heads * head_dim};
  Vec qkv = random_vec(n * width, 9);
  auto run = [&](const Vec& in) {
    Vec out(n * heads * head_dim), probs(n * n);
    for (int64_t h = 0; h < heads; ++h)
      attention_head_forward(s, h, in.data(), in.data() + 4, in.data() + 8, out.data(), probs.data());
    return out;
  };
  const Vec before = run(qkv);
  for (int64_t i = 4; i < width; ++i) qkv[(n - 1) * width + i] += 1.0;
  const Vec after = run(qkv);
  for (int64_t i = 0; i < (n - 1) * heads * head_dim; ++i) EXPECT_EQ(before[i], after[i]);
  EXPECT_NE(before.back(), after.back());
}

TEST(BackwardOps, CrossEntropy) {
  const int64_t vocab = 7;
  const Vec logits = random_vec(vocab, 10, 3.0);
  Vec d(vocab);
  const double loss = cross_entropy(logits.data(), vocab, 3, 0.5f, d.data());
  double lse = 0;
  for (double x : logits) lse += std::exp(x);
  EXPECT_NEAR(loss, std::log(lse) - logits[3], 1e-12);
  auto forward = [&](const Vec& in) { return Vec(1, 0.5 * cross_entropy<double>(in.data(), vocab, 3, 0.0f, nullptr)); };
  expect_close(d, numeric_grad(logits, Vec{1.0}, forward));
}

}  // namespace
}  // namespace loragate::train
