// Batched multi-LoRA on the CPU (SGMV semantics): the tokens of one step are
// grouped in segments by adapter slot, and every segment adds its adapter's
// low-rank update to the base projection's output:
//
//   for each segment s with slot >= 0, for each token t in s:
//     h[r]  = sum_k x[t][k] * A[slot][r][k]          for r < rank(slot)   (shrink)
//     y[t][o] += scaling(slot) * sum_r h[r] * B[slot][o][r]                (expand)
//
// Decode is the one-token-per-segment case. Slots of different ranks mix in
// one call without padding: each slot's own rank bounds its loops.
// Every token is computed the same way whatever segment it sits in, so
// batched results equal one-at-a-time results bit for bit.
#pragma once

#include <cstdint>

namespace loragate::cpu {

// The weights of one (layer, projection) across all slots, in preallocated
// stacked buffers. B is stored transposed ([rank][out]) so the expand step
// streams rows.
struct LoraSlotWeights {
  const float* a = nullptr;         // [num_slots][max_rank][in]
  const float* b_t = nullptr;       // [num_slots][max_rank][out]
  const int32_t* ranks = nullptr;   // [num_slots]; 0 = this slot leaves the projection alone
  const float* scalings = nullptr;  // [num_slots]
  int64_t in = 0, out = 0, max_rank = 0;
};

struct LoraSegment {
  int64_t token_begin = 0;
  int64_t num_tokens = 0;
  int32_t slot = -1;  // -1 = no adapter
};

// Adds the segments' LoRA updates to y (rows ldy apart) from x (rows ldx apart).
void lora_add(const float* x, int64_t ldx, const LoraSegment* segments, int64_t num_segments,
              const LoraSlotWeights& w, float* y, int64_t ldy);

// One projection reading the shared input: its weights and its output.
struct LoraTarget {
  LoraSlotWeights w;
  float* y = nullptr;
  int64_t ldy = 0;
};

// lora_add for several projections of the same input (q, k and v; gate and
// up) in one fork/join of the compute pool, which at batch 1 costs as much
// as a small projection's update. Each target's result is what lora_add
// alone gives it, bit for bit.
void lora_add_targets(const float* x, int64_t ldx, const LoraSegment* segments, int64_t num_segments,
                      const LoraTarget* targets, int num_targets);

}  // namespace loragate::cpu
