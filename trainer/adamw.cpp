// AdamW: PyTorch's torch.optim.AdamW update (single-tensor path), the
// warm-up / cosine schedule and clip_grad_norm_'s global clipping.
#include "trainer/adamw.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace loragate::train {

AdamW::AdamW(const OptimizerConfig& config, int64_t total_steps) : config_(config), total_steps_(total_steps) {}

double AdamW::lr_at(int64_t step) const {
  const int64_t warmup = config_.warmup_steps;
  if (warmup > 0 && step < warmup) {
    return config_.lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  }
  if (config_.schedule == Schedule::kConstant) return config_.lr;
  // Hugging Face's get_cosine_schedule_with_warmup (half a cycle), but
  // counted so that the first step after warm-up gets the full lr.
  const int64_t span = std::max<int64_t>(1, total_steps_ - warmup);
  double progress = static_cast<double>(step - warmup) / static_cast<double>(span);
  progress = std::clamp(progress, 0.0, 1.0);
  return config_.lr * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

double AdamW::step(LoraParams& params) {
  std::vector<LoraParam>& ps = params.params();

  // Global L2 norm over every gradient, accumulated in double.
  double sum_sq = 0;
  for (const LoraParam& p : ps) {
    for (float g : p.grad_a) sum_sq += static_cast<double>(g) * g;
    for (float g : p.grad_b) sum_sq += static_cast<double>(g) * g;
  }
  const double norm = std::sqrt(sum_sq);
  // A non-finite gradient would turn every parameter and moment into NaN:
  // leave them as they are and let the caller see the norm.
  if (!std::isfinite(norm)) return norm;

  // torch.nn.utils.clip_grad_norm_: grads *= max_norm / (norm + 1e-6) when that is < 1.
  if (config_.max_grad_norm > 0 && norm > config_.max_grad_norm) {
    const float scale = static_cast<float>(config_.max_grad_norm / (norm + 1e-6));
    for (LoraParam& p : ps) {
      for (float& g : p.grad_a) g *= scale;
      for (float& g : p.grad_b) g *= scale;
    }
  }

  // Moments: m_a, v_a, m_b, v_b per param; (re)made when they do not fit.
  bool fits = moments_.size() == 4 * ps.size();
  for (size_t i = 0; fits && i < ps.size(); ++i) {
    fits = moments_[4 * i].size() == ps[i].a.size() && moments_[4 * i + 1].size() == ps[i].a.size() &&
           moments_[4 * i + 2].size() == ps[i].b.size() && moments_[4 * i + 3].size() == ps[i].b.size();
  }
  if (!fits) {
    moments_.assign(4 * ps.size(), {});
    for (size_t i = 0; i < ps.size(); ++i) {
      moments_[4 * i].assign(ps[i].a.size(), 0.0f);
      moments_[4 * i + 1].assign(ps[i].a.size(), 0.0f);
      moments_[4 * i + 2].assign(ps[i].b.size(), 0.0f);
      moments_[4 * i + 3].assign(ps[i].b.size(), 0.0f);
    }
  }

  ++t_;
  const double lr = lr_at(t_ - 1);
  const double beta1 = config_.beta1, beta2 = config_.beta2, eps = config_.eps;
  const double t = static_cast<double>(t_);
  const double step_size = lr / (1.0 - std::pow(beta1, t));
  const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow(beta2, t));
  const double decay = 1.0 - lr * config_.weight_decay;

  // Each scalar in double, stored back in f32 (the update is cheap next to a
  // forward and backward pass).
  auto update = [&](std::vector<float>& param, const std::vector<float>& grad, std::vector<float>& m,
                    std::vector<float>& v) {
    for (size_t j = 0; j < param.size(); ++j) {
      const double g = grad[j];
      const double p = static_cast<double>(param[j]) * decay;
      const double mj = beta1 * m[j] + (1.0 - beta1) * g;
      const double vj = beta2 * v[j] + (1.0 - beta2) * g * g;
      m[j] = static_cast<float>(mj);
      v[j] = static_cast<float>(vj);
      const double denom = std::sqrt(static_cast<double>(v[j])) / bias_correction2_sqrt + eps;
      param[j] = static_cast<float>(p - step_size * static_cast<double>(m[j]) / denom);
    }
  };
  for (size_t i = 0; i < ps.size(); ++i) {
    update(ps[i].a, ps[i].grad_a, moments_[4 * i], moments_[4 * i + 1]);
    update(ps[i].b, ps[i].grad_b, moments_[4 * i + 2], moments_[4 * i + 3]);
  }
  return norm;
}

}  // namespace loragate::train
