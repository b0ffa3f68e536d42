#include "kernels/cpu/lora.h"

#include <algorithm>
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

// The work items of one target: the tokens of segments with an adapter at
// its projection, numbered across segments. A step has few segments, so
// finding item i's segment by a linear scan is cheap.
class TargetItems {
 public:
  void init(const LoraSegment* segments, int64_t num_segments, const LoraSlotWeights& w) {
    segments_ = segments;
    w_ = &w;
    count_ = 0;
    for (int64_t s = 0; s < num_segments; ++s) count_ += active(segments[s]) ? segments[s].num_tokens : 0;
  }
  int64_t count() const { return count_; }
  // Item i's adapter slot and token.
  void locate(int64_t i, int32_t& slot, int64_t& token) const {
    int64_t s = 0, first = 0;  // the segment holding item i, and its first item
    while (!active(segments_[s]) || i >= first + segments_[s].num_tokens) {
      if (active(segments_[s])) first += segments_[s].num_tokens;
      ++s;
    }
    slot = segments_[s].slot;
    token = segments_[s].token_begin + (i - first);
  }

 private:
  bool active(const LoraSegment& seg) const { return seg.slot >= 0 && w_->ranks[seg.slot] != 0; }
  const LoraSegment* segments_ = nullptr;
  const LoraSlotWeights* w_ = nullptr;
  int64_t count_ = 0;
};

constexpr int kMaxTargets = 4;

}  // namespace

void lora_add(const float* x, int64_t ldx, const LoraSegment* segments, int64_t num_segments,
              const LoraSlotWeights& w, float* y, int64_t ldy) {
  const LoraTarget target{w, y, ldy};
  lora_add_targets(x, ldx, segments, num_segments, &target, 1);
}

void lora_add_targets(const float* x, int64_t ldx, const LoraSegment* segments, int64_t num_segments,
                      const LoraTarget* targets, int num_targets) {
  // Called for every projection of every layer: nothing is allocated here
  // once the buffers have grown.
  if (num_targets > kMaxTargets) {
    lora_add_targets(x, ldx, segments, num_segments, targets, kMaxTargets);
    lora_add_targets(x, ldx, segments, num_segments, targets + kMaxTargets, num_targets - kMaxTargets);
    return;
  }
  TargetItems items[kMaxTargets];
  int64_t total = 0, work = 0, max_items = 0;
  for (int t = 0; t < num_targets; ++t) {
    const LoraSlotWeights& w = targets[t].w;
    items[t].init(segments, num_segments, w);
    const int64_t n = items[t].count();
    total += n;
    max_items = std::max(max_items, n);
    work += n * w.max_rank * (w.in + w.out);
  }
  if (total == 0) return;
  ThreadPool& pool = compute_pool();
  const bool parallel = work > (1 << 16);

  if (parallel && max_items < pool.size()) {
    // Fewer tokens than threads (decode at batch 1): every thread takes a
    // share of each token's shrink (rank rows), then, after a barrier, a
    // share of its expand (output columns), so the adapters' bytes stream
    // on every core. Each h[r] and each y[o] is the same sequence of
    // operations as in lora_token, so results do not change.
    thread_local std::vector<float> h_all;
    int64_t h_size = 0;
    int64_t h_begin[kMaxTargets];
    for (int t = 0; t < num_targets; ++t) {
      h_begin[t] = h_size;
      h_size += items[t].count() * targets[t].w.max_rank;
    }
    if (h_all.size() < static_cast<size_t>(h_size)) h_all.resize(static_cast<size_t>(h_size));
    float* h = h_all.data();
    pool.run(0, [&](int thread, int nt) {
      for (int t = 0; t < num_targets; ++t) {
        const LoraSlotWeights& w = targets[t].w;
        for (int64_t i = 0; i < items[t].count(); ++i) {
          int32_t slot;
          int64_t token;
          items[t].locate(i, slot, token);
          const int32_t rank = w.ranks[slot];
          const float* a = w.a + slot * w.max_rank * w.in;
          float* hi = h + h_begin[t] + i * w.max_rank;
          for (int64_t r = rank * thread / nt; r < rank * (thread + 1) / nt; ++r) {
            hi[r] = vec_dot(x + token * ldx, a + r * w.in, w.in) * w.scalings[slot];
          }
        }
      }
      ThreadPool::barrier();
      for (int t = 0; t < num_targets; ++t) {
        const LoraSlotWeights& w = targets[t].w;
        // Column ranges in whole 16-float vectors.
        const int64_t vectors = (w.out + 15) / 16;
        const int64_t c0 = std::min(w.out, 16 * (vectors * thread / nt));
        const int64_t c1 = std::min(w.out, 16 * (vectors * (thread + 1) / nt));
        for (int64_t i = 0; i < items[t].count() && c0 < c1; ++i) {
          int32_t slot;
          int64_t token;
          items[t].locate(i, slot, token);
          const float* b_t = w.b_t + slot * w.max_rank * w.out;
          const float* hi = h + h_begin[t] + i * w.max_rank;
          float* y = targets[t].y + token * targets[t].ldy;
          for (int32_t r = 0; r < w.ranks[slot]; ++r) vec_axpy(hi[r], b_t + r * w.out + c0, y + c0, c1 - c0);
        }
      }
    });
    return;
  }

  // Otherwise threads take contiguous runs of all targets' items.
  pool.run(parallel ? 0 : 1, [&](int thread, int nt) {
    thread_local std::vector<float> h;  // shrink results; grows once per thread
    int64_t i = total * thread / nt;
    const int64_t end = total * (thread + 1) / nt;
    int t = 0;
    int64_t before = 0;  // items of the targets before t
    while (i < end) {
      while (i >= before + items[t].count()) before += items[t++].count();
      const LoraSlotWeights& w = targets[t].w;
      if (h.size() < static_cast<size_t>(w.max_rank)) h.resize(static_cast<size_t>(w.max_rank));
      int32_t slot;
      int64_t token;
      items[t].locate(i - before, slot, token);
      lora_token(x + token * ldx, w.a + slot * w.max_rank * w.in, w.b_t + slot * w.max_rank * w.out, w.ranks[slot],
                 w.scalings[slot], w.in, w.out, targets[t].y + token * targets[t].ldy, h.data());
      ++i;
    }
  });
}

}  // namespace loragate::cpu
