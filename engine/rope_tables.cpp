#include "engine/rope_tables.h"

#include <cmath>

namespace loragate {

std::vector<float> rope_inv_freq(const ModelConfig& c) {
  const int64_t half = c.head_dim / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  const float theta = static_cast<float>(c.rope_theta);
  for (int64_t i = 0; i < half; ++i) {
    inv[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(c.head_dim));
  }
  const RopeScaling& s = c.rope_scaling;
  if (s.type == RopeScalingType::kLinear) {
    for (float& f : inv) f = static_cast<float>(f / s.factor);
  } else if (s.type == RopeScalingType::kLlama3) {
    const double old_len = static_cast<double>(s.original_max_position_embeddings);
    const double low_wavelen = old_len / s.low_freq_factor;
    const double high_wavelen = old_len / s.high_freq_factor;
    for (float& f : inv) {
      const double wavelen = 2.0 * M_PI / f;
      if (wavelen > low_wavelen) {
        f = static_cast<float>(f / s.factor);
      } else if (wavelen >= high_wavelen) {
        const double smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = static_cast<float>((1.0 - smooth) * f / s.factor + smooth * f);
      }
    }
  }
  return inv;
}

void rope_tables(const std::vector<float>& inv_freq, const int32_t* positions, size_t tokens, float* cos,
                 float* sin) {
  const size_t half = inv_freq.size();
  for (size_t t = 0; t < tokens; ++t) {
    const float pos = static_cast<float>(positions[t]);
    for (size_t j = 0; j < half; ++j) {
      const float angle = pos * inv_freq[j];
      cos[t * half + j] = std::cos(angle);
      sin[t * half + j] = std::sin(angle);
    }
  }
}

}  // namespace loragate
