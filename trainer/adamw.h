// AdamW over a LoraParams' gradients, with the learning-rate schedule and
// global gradient-norm clipping of OptimizerConfig.
//
// step() applies, for every scalar p with gradient g (PyTorch's AdamW):
//   p -= lr_t * weight_decay * p
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   p -= lr_t * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
// with t the 1-based step and lr_t = lr_at(t - 1). Moments are kept in f32
// (double for the bias corrections). Not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "trainer/lora_params.h"
#include "trainer/train_config.h"

namespace loragate::train {

class AdamW {
 public:
  AdamW(const OptimizerConfig& config, int64_t total_steps);

  // The learning rate of 0-based step `step`: linear warm-up from lr/warmup
  // over warmup_steps, then constant, or cosine from lr down to 0 at total_steps.
  double lr_at(int64_t step) const;

  // Clips the global gradient norm to max_grad_norm (when > 0), then updates
  // every parameter. Returns the gradient norm before clipping. A non-finite
  // norm (a NaN or infinite gradient) changes nothing, not even the step
  // count: the caller sees it in the return value and stops.
  double step(LoraParams& params);

  int64_t steps_taken() const { return t_; }
  // Moments, in LoraParams order: m_a, v_a, m_b, v_b of each param; empty
  // before the first step (which allocates them, or remakes them as zeros
  // when they do not fit the params it is given).
  std::vector<std::vector<float>>& moments() { return moments_; }
  const std::vector<std::vector<float>>& moments() const { return moments_; }
  void set_steps_taken(int64_t t) { t_ = t; }

 private:
  OptimizerConfig config_;
  int64_t total_steps_;
  int64_t t_ = 0;
  std::vector<std::vector<float>> moments_;  // allocated on the first step
};

}  // namespace loragate::train
