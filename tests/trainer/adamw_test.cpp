// AdamW: updates checked against PyTorch's formulas written out in double for
// a few scalars, the warm-up and cosine schedule, and global clipping.
#include "trainer/adamw.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "tests/trainer/trainer_fixtures.h"

namespace loragate::train {
namespace {

// Two small params (layer 0 q and k, rank 1) with every value and gradient
// zero, so that a test sets the few scalars it follows.
LoraParams two_params() {
  LoraRecipe r;
  r.rank = 1;
  r.alpha = 1;
  r.targets = {LoraModule::kQ, LoraModule::kK};
  r.layers = {0};
  auto p = LoraParams::init(testing::small_train_base(), r, 1);
  EXPECT_TRUE(p.is_ok());
  for (LoraParam& q : p->params()) {
    std::fill(q.a.begin(), q.a.end(), 0.0f);
    std::fill(q.b.begin(), q.b.end(), 0.0f);
  }
  return std::move(*p);
}

OptimizerConfig adam(double lr, double weight_decay = 0) {
  OptimizerConfig c;
  c.lr = lr;
  c.beta1 = 0.9;
  c.beta2 = 0.999;
  c.eps = 1e-8;
  c.weight_decay = weight_decay;
  return c;
}

TEST(AdamW, TwoStepsMatchTheFormulas) {
  LoraParams p = two_params();
  LoraParam& q = p.params()[0];
  LoraParam& k = p.params()[1];
  q.a[0] = 1.0f;   // followed with gradients 0.5 then -0.25
  q.b[3] = -2.0f;  // with 1e-3 then 1e-3
  k.a[5] = 0.5f;   // with no gradient: never moves without weight decay
  AdamW opt(adam(0.1), 100);

  const double b1 = 0.9, b2 = 0.999, lr = 0.1, eps = 1e-8;
  // Step 1, t = 1.
  q.grad_a[0] = 0.5f;
  q.grad_b[3] = 1e-3f;
  opt.step(p);
  EXPECT_EQ(opt.steps_taken(), 1);
  const double m1 = (1 - b1) * 0.5, v1 = (1 - b2) * 0.5 * 0.5;
  const double p1 = 1.0 - lr * (m1 / (1 - b1)) / (std::sqrt(v1 / (1 - b2)) + eps);
  EXPECT_NEAR(p1, 0.900000002, 1e-12);  // the first step moves by lr, whatever the gradient's size
  EXPECT_NEAR(q.a[0], p1, 1e-7);
  const double mb1 = (1 - b1) * 1e-3, vb1 = (1 - b2) * 1e-6;
  const double pb1 = -2.0 - lr * (mb1 / (1 - b1)) / (std::sqrt(vb1 / (1 - b2)) + eps);
  EXPECT_NEAR(q.b[3], pb1, 1e-6);
  EXPECT_EQ(k.a[5], 0.5f);
  EXPECT_EQ(q.a[1], 0.0f);
  // Moments: m_a, v_a, m_b, v_b per param.
  ASSERT_EQ(opt.moments().size(), 8u);
  // Stored in f32: within a few f32 roundings of the double values.
  EXPECT_NEAR(opt.moments()[0][0], m1, 1e-6 * m1);
  EXPECT_NEAR(opt.moments()[1][0], v1, 1e-6 * v1);
  EXPECT_NEAR(opt.moments()[2][3], mb1, 1e-6 * mb1);
  EXPECT_EQ(opt.moments()[4][5], 0.0f);

  // Step 2, t = 2: the bias corrections are 1 - 0.81 and 1 - 0.998001.
  p.zero_grad();
  q.grad_a[0] = -0.25f;
  q.grad_b[3] = 1e-3f;
  opt.step(p);
  EXPECT_EQ(opt.steps_taken(), 2);
  const double m2 = b1 * m1 + (1 - b1) * -0.25, v2 = b2 * v1 + (1 - b2) * 0.0625;
  EXPECT_NEAR(m2, 0.02, 1e-15);
  EXPECT_NEAR(v2, 0.00031225, 1e-15);
  const double p2 = p1 - lr * (m2 / 0.19) / (std::sqrt(v2 / 0.001999) + eps);
  EXPECT_NEAR(p2, 0.8733662987078463, 1e-12);
  EXPECT_NEAR(q.a[0], p2, 1e-6);
  const double mb2 = b1 * mb1 + (1 - b1) * 1e-3, vb2 = b2 * vb1 + (1 - b2) * 1e-6;
  const double pb2 = pb1 - lr * (mb2 / 0.19) / (std::sqrt(vb2 / 0.001999) + eps);
  EXPECT_NEAR(q.b[3], pb2, 1e-6);
  EXPECT_NEAR(opt.moments()[0][0], m2, 1e-6 * m2);
  EXPECT_NEAR(opt.moments()[1][0], v2, 1e-6 * v2);
  EXPECT_EQ(k.a[5], 0.5f);
}

TEST(AdamW, WeightDecayIsDecoupled) {
  LoraParams p = two_params();
  LoraParam& q = p.params()[0];
  q.a[0] = 2.0f;   // no gradient: only the decay moves it
  q.a[1] = 1.0f;   // gradient 0.5: decay first, then the Adam step
  q.grad_a[1] = 0.5f;
  const double lr = 0.01, wd = 0.1;
  AdamW opt(adam(lr, wd), 10);
  opt.step(p);
  EXPECT_NEAR(q.a[0], 2.0 * (1 - lr * wd), 1e-7);  // 1.998
  EXPECT_NEAR(q.a[0], 1.998, 1e-7);
  const double m1 = 0.1 * 0.5, v1 = 0.001 * 0.25;
  const double want = 1.0 * (1 - lr * wd) - lr * (m1 / 0.1) / (std::sqrt(v1 / 0.001) + 1e-8);
  EXPECT_NEAR(q.a[1], want, 1e-7);  // 0.999 - 0.01
  EXPECT_NEAR(q.a[1], 0.989, 1e-7);
  opt.step(p);  // the same gradient again: decay once more, then Adam
  const double p0 = 1.998 * (1 - lr * wd);
  EXPECT_NEAR(q.a[0], p0, 1e-6);
}

TEST(AdamW, WarmupThenConstant) {
  OptimizerConfig c = adam(1.0);
  c.warmup_steps = 4;
  AdamW opt(c, 14);
  EXPECT_DOUBLE_EQ(opt.lr_at(0), 0.25);
  EXPECT_DOUBLE_EQ(opt.lr_at(1), 0.5);
  EXPECT_DOUBLE_EQ(opt.lr_at(3), 1.0);
  EXPECT_DOUBLE_EQ(opt.lr_at(4), 1.0);
  EXPECT_DOUBLE_EQ(opt.lr_at(13), 1.0);
  EXPECT_DOUBLE_EQ(opt.lr_at(100), 1.0);
  AdamW none(adam(0.5), 14);
  EXPECT_DOUBLE_EQ(none.lr_at(0), 0.5);
}

TEST(AdamW, WarmupThenCosine) {
  OptimizerConfig c = adam(2.0);
  c.warmup_steps = 4;
  c.schedule = Schedule::kCosine;
  AdamW opt(c, 14);  // 10 steps of decay after the warm-up
  EXPECT_DOUBLE_EQ(opt.lr_at(0), 0.5);
  EXPECT_DOUBLE_EQ(opt.lr_at(3), 2.0);
  EXPECT_DOUBLE_EQ(opt.lr_at(4), 2.0);                                     // progress 0
  EXPECT_NEAR(opt.lr_at(6), 2.0 * 0.5 * (1 + std::cos(std::numbers::pi * 0.2)), 1e-12);
  EXPECT_NEAR(opt.lr_at(6), 1.8090169943749475, 1e-12);
  EXPECT_NEAR(opt.lr_at(9), 1.0, 1e-12);                                   // progress 0.5
  EXPECT_NEAR(opt.lr_at(13), 2.0 * 0.5 * (1 + std::cos(std::numbers::pi * 0.9)), 1e-12);
  EXPECT_NEAR(opt.lr_at(14), 0.0, 1e-12);                                  // progress 1
  EXPECT_NEAR(opt.lr_at(20), 0.0, 1e-12);                                  // never below 0

  OptimizerConfig plain = adam(1.0);
  plain.schedule = Schedule::kCosine;
  AdamW no_warmup(plain, 10);
  EXPECT_DOUBLE_EQ(no_warmup.lr_at(0), 1.0);
  EXPECT_NEAR(no_warmup.lr_at(5), 0.5, 1e-12);
}

TEST(AdamW, StepUsesTheScheduledRate) {
  // Warm-up over 4 steps: the first update is made at lr / 4.
  LoraParams p = two_params();
  LoraParam& q = p.params()[0];
  q.a[0] = 1.0f;
  q.grad_a[0] = 3.0f;
  OptimizerConfig c = adam(0.4);
  c.warmup_steps = 4;
  AdamW opt(c, 10);
  opt.step(p);
  const double m1 = 0.1 * 3.0, v1 = 0.001 * 9.0;
  EXPECT_NEAR(q.a[0], 1.0 - 0.1 * (m1 / 0.1) / (std::sqrt(v1 / 0.001) + 1e-8), 1e-7);  // 0.9
  EXPECT_NEAR(q.a[0], 0.9, 1e-6);
}

TEST(AdamW, ClipsTheGlobalNorm) {
  LoraParams p = two_params();
  LoraParam& q = p.params()[0];
  LoraParam& k = p.params()[1];
  // 3 and 4 in different params and matrices: the norm is 5 over all of them.
  q.grad_a[2] = 3.0f;
  k.grad_b[1] = -4.0f;
  OptimizerConfig c = adam(0.1);
  c.max_grad_norm = 1.0;
  AdamW opt(c, 10);
  EXPECT_DOUBLE_EQ(opt.step(p), 5.0);  // before clipping
  // clip_grad_norm_: scaled by max_norm / (norm + 1e-6), in place.
  const double scale = 1.0 / (5.0 + 1e-6);
  EXPECT_NEAR(q.grad_a[2], 3.0 * scale, 1e-7);
  EXPECT_NEAR(k.grad_b[1], -4.0 * scale, 1e-7);
  EXPECT_NEAR(opt.moments()[0][2], 0.1 * 3.0 * scale, 1e-8);   // m_a of q
  EXPECT_NEAR(opt.moments()[7][1], 0.001 * 16.0 * scale * scale, 1e-9);  // v_b of k

  // Under the limit: left alone.
  LoraParams r = two_params();
  r.params()[0].grad_a[0] = 0.3f;
  r.params()[1].grad_a[0] = 0.4f;
  AdamW keep(c, 10);
  EXPECT_NEAR(keep.step(r), 0.5, 1e-7);
  EXPECT_EQ(r.params()[0].grad_a[0], 0.3f);
  EXPECT_EQ(r.params()[1].grad_a[0], 0.4f);

  // max_grad_norm 0: never clipped, norm still reported.
  LoraParams s = two_params();
  s.params()[0].grad_a[0] = 30.0f;
  s.params()[0].grad_b[0] = 40.0f;
  AdamW off(adam(0.1), 10);
  EXPECT_DOUBLE_EQ(off.step(s), 50.0);
  EXPECT_EQ(s.params()[0].grad_a[0], 30.0f);
}

TEST(AdamW, NonFiniteGradientChangesNothing) {
  LoraParams p = two_params();
  LoraParam& q = p.params()[0];
  q.a[0] = 1.0f;
  q.grad_a[0] = 1.0f;
  q.grad_b[0] = std::numeric_limits<float>::quiet_NaN();
  AdamW opt(adam(0.1), 10);
  EXPECT_TRUE(std::isnan(opt.step(p)));
  EXPECT_EQ(q.a[0], 1.0f);
  EXPECT_EQ(opt.steps_taken(), 0);
  q.grad_b[0] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isinf(opt.step(p)));
  EXPECT_EQ(q.a[0], 1.0f);
  q.grad_b[0] = 0.0f;
  EXPECT_DOUBLE_EQ(opt.step(p), 1.0);
  EXPECT_EQ(opt.steps_taken(), 1);
  EXPECT_NEAR(q.a[0], 0.9, 1e-6);
}

}  // namespace
}  // namespace loragate::train
