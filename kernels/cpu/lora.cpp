#include "kernels/cpu/lora.h"

#include <cstddef>
#include <vector>

#include "kernels/cpu/thread_pool.h"
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
  // Called for every projection of every layer: nothing is allocated here.
  // Work items are the tokens of segments with an adapter at this projection,
  // numbered across segments so threads balance; a step has few segments, so
  // finding a token's segment by a linear scan is cheap.
  auto active = [&](const LoraSegment& seg) { return seg.slot >= 0 && w.ranks[seg.slot] != 0; };
  int64_t n = 0;
  for (int64_t s = 0; s < num_segments; ++s) n += active(segments[s]) ? segments[s].num_tokens : 0;
  if (n == 0) return;
  const int64_t a_stride = w.max_rank * w.in, b_stride = w.max_rank * w.out;
  const bool parallel = n > 1 && n * w.max_rank * (w.in + w.out) > (1 << 16);
  compute_pool().run(parallel ? 0 : 1, [&](int thread, int nt) {
    thread_local std::vector<float> h;  // shrink results; grows once per thread
    if (h.size() < static_cast<size_t>(w.max_rank)) h.resize(static_cast<size_t>(w.max_rank));
    for (int64_t i = n * thread / nt; i < n * (thread + 1) / nt; ++i) {
      int64_t s = 0, first = 0;  // the segment holding item i, and its first item
      while (!active(segments[s]) || i >= first + segments[s].num_tokens) {
        if (active(segments[s])) first += segments[s].num_tokens;
        ++s;
      }
      const int32_t slot = segments[s].slot;
      const int64_t token = segments[s].token_begin + (i - first);
      lora_token(x + token * ldx, w.a + slot * a_stride, w.b_t + slot * b_stride, w.ranks[slot], w.scalings[slot],
                 w.in, w.out, y + token * ldy, h.data());
    }
  });
}

}  // namespace loragate::cpu
