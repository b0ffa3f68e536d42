#include "kernels/cpu/ops.h"

#include <cmath>

namespace loragate::cpu {

void rmsnorm(const float* x, const float* w, float* y, int64_t tokens, int64_t dim, float eps) {
  for (int64_t t = 0; t < tokens; ++t) {
    const float* xr = x + t * dim;
    float* yr = y + t * dim;
    float ss = 0.0f;
    for (int64_t i = 0; i < dim; ++i) ss += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) yr[i] = w[i] * (xr[i] * inv);
  }
}

void rope_rotate_half(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t row_stride,
                      const float* cos, const float* sin) {
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* c = cos + t * half;
    const float* s = sin + t * half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + t * row_stride + h * head_dim;
      for (int64_t j = 0; j < half; ++j) {
        const float a = v[j], b = v[j + half];
        v[j] = a * c[j] - b * s[j];
        v[j + half] = b * c[j] + a * s[j];
      }
    }
  }
}

void silu_mul(const float* gate_up, float* out, int64_t tokens, int64_t inter) {
  for (int64_t t = 0; t < tokens; ++t) {
    const float* g = gate_up + t * 2 * inter;
    const float* u = g + inter;
    float* o = out + t * inter;
    for (int64_t i = 0; i < inter; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

void add_bias(float* x, const float* b, int64_t tokens, int64_t dim, int64_t row_stride) {
  for (int64_t t = 0; t < tokens; ++t) {
    float* r = x + t * row_stride;
    for (int64_t i = 0; i < dim; ++i) r[i] += b[i];
  }
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

int64_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

}  // namespace loragate::cpu
