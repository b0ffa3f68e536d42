#include "kernels/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/vec.h"

namespace loragate::cpu {

void paged_attention_one(const float* q, float* out, int64_t num_heads, const PagedKv& kv,
                         const int32_t* block_table, int64_t first_pos, int64_t last_pos, float* scratch) {
  const int64_t d = kv.head_dim;
  const int64_t group = num_heads / kv.num_kv_heads;
  const int64_t row = kv.num_kv_heads * d;  // floats per cached token
  const int64_t n = last_pos - first_pos + 1;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  auto cached = [&](const float* base, int64_t pos, int64_t kvh) {
    const int64_t block = block_table[pos / kv.block_size];
    return base + (block * kv.block_size + pos % kv.block_size) * row + kvh * d;
  };
  for (int64_t h = 0; h < num_heads; ++h) {
    const float* qh = q + h * d;
    const int64_t kvh = h / group;
    float max_score = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) {
      scratch[i] = vec_dot(qh, cached(kv.k, first_pos + i, kvh), d) * scale;
      max_score = std::max(max_score, scratch[i]);
    }
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      scratch[i] = std::exp(scratch[i] - max_score);
      sum += scratch[i];
    }
    const float inv = 1.0f / sum;
    float* oh = out + h * d;
    std::fill(oh, oh + d, 0.0f);
    for (int64_t i = 0; i < n; ++i) vec_axpy(scratch[i] * inv, cached(kv.v, first_pos + i, kvh), oh, d);
  }
}

}  // namespace loragate::cpu
