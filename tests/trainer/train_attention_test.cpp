// The trainer's vectorised f32 attention against backward_ops' reference
// attention in f64 (itself checked against finite differences), over shapes
// from a single token to stories260K's and the 110m preset's heads.
#include "trainer/train_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace loragate::train {
namespace {

struct Shape {
  int64_t n, heads, kv_heads, head_dim, window;
};

// Largest |a - b| over the largest |b|: the error relative to the values' scale.
double relative_error(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  EXPECT_GT(scale, 1e-3) << "values of zeros check nothing";
  return worst / scale;
}

void check(const Shape& shape) {
  SCOPED_TRACE(::testing::Message() << "n " << shape.n << ", heads " << shape.heads << "/" << shape.kv_heads
                                    << ", head_dim " << shape.head_dim << ", window " << shape.window);
  const int64_t n = shape.n, d = shape.head_dim;
  const int64_t q_out = shape.heads * d, kv_out = shape.kv_heads * d, width = q_out + 2 * kv_out;
  const AttentionShape s{n, shape.heads, shape.kv_heads, d, shape.window, width, width, width, q_out};
  std::mt19937 rng(static_cast<uint32_t>(n * 131 + d));
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  std::vector<float> qkv(static_cast<size_t>(n * width)), d_out(static_cast<size_t>(n * q_out));
  for (float& x : qkv) x = u(rng);
  for (float& x : d_out) x = u(rng);
  const std::vector<double> qkv64(qkv.begin(), qkv.end()), d_out64(d_out.begin(), d_out.end());

  // Reference, f64.
  std::vector<double> out64(d_out.size()), grad64(qkv.size(), 0.0), probs(static_cast<size_t>(n * n)),
      dprobs(probs.size());
  const double* r = qkv64.data();
  double* g = grad64.data();
  for (int64_t h = 0; h < shape.heads; ++h) {
    attention_head_forward(s, h, r, r + q_out, r + q_out + kv_out, out64.data(), probs.data());
    attention_head_backward(s, h, r, r + q_out, r + q_out + kv_out, d_out64.data(), g, g + q_out, g + q_out + kv_out,
                            probs.data(), dprobs.data());
  }

  // The trainer's, f32, one call per KV head.
  std::vector<float> out(d_out.size()), grad(qkv.size(), 0.0f);
  AttentionScratch scratch;
  const float* x = qkv.data();
  float* dx = grad.data();
  for (int64_t kvh = 0; kvh < shape.kv_heads; ++kvh) {
    attention_group_forward(s, kvh, x, x + q_out, x + q_out + kv_out, out.data(), scratch);
    attention_group_backward(s, kvh, x, x + q_out, x + q_out + kv_out, d_out.data(), dx, dx + q_out,
                             dx + q_out + kv_out, scratch);
  }
  EXPECT_LT(relative_error(out, out64), 1e-5);
  EXPECT_LT(relative_error(grad, grad64), 1e-5);
}

TEST(TrainAttention, OneToken) { check({1, 2, 1, 4, 0}); }
TEST(TrainAttention, MultiHead) { check({5, 2, 2, 4, 0}); }
TEST(TrainAttention, Stories260KHeads) { check({37, 8, 4, 8, 0}); }
TEST(TrainAttention, Preset110mHeads) { check({70, 12, 4, 64, 0}); }
TEST(TrainAttention, SlidingWindow) { check({21, 4, 1, 16, 5}); }

}  // namespace
}  // namespace loragate::train
