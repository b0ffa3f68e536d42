#include "kernels/cpu/lora.h"

#include <omp.h>

#include <cstddef>
#include <vector>

#include "kernels/cpu/vec.h"

namespace loragate::cpu {
namespace {

// One token: shrink to rank values, scale them, expand into y.
void lora_token(const float* x, const float* a, const float* b_t, int32_t rank, float scaling, int64_t in,
                int64_t out, float* y, float* h) {
  for (int32_t r = 0; r < rank; ++r) h[r] = vec_dot(x, a + r * in, in) * scaling;
  for (int32_t r = 0; r < rank; ++r) vec_axpy(h[r], b_t + r * out, y, out);
}

}  // namespace

void lora_add(const float* x, int64_t ldx, const LoraSegment* segments, int64_t num_segments,
              const LoraSlotWeights& w, float* y, int64_t ldy) {
  // Flatten to (token, slot) work items so threads balance across segments.
  struct Item {
    int64_t token;
    int32_t slot;
  };
  std::vector<Item> items;
  for (int64_t s = 0; s < num_segments; ++s) {
    const LoraSegment& seg = segments[s];
    if (seg.slot < 0 || w.ranks[seg.slot] == 0) continue;
    for (int64_t t = 0; t < seg.num_tokens; ++t) items.push_back({seg.token_begin + t, seg.slot});
  }
  const int64_t n = static_cast<int64_t>(items.size());
  if (n == 0) return;
  const int64_t a_stride = w.max_rank * w.in, b_stride = w.max_rank * w.out;
  const bool parallel = n > 1 && n * w.max_rank * (w.in + w.out) > (1 << 16);
#pragma omp parallel if (parallel)
  {
    std::vector<float> h(static_cast<size_t>(w.max_rank));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const Item& it = items[i];
      lora_token(x + it.token * ldx, w.a + it.slot * a_stride, w.b_t + it.slot * b_stride, w.ranks[it.slot],
                 w.scalings[it.slot], w.in, w.out, y + it.token * ldy, h.data());
    }
  }
}

}  // namespace loragate::cpu
