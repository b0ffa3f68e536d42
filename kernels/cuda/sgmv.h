// Batched multi-LoRA on the GPU, Punica style, with the semantics of
// cpu::lora_add (kernels/cpu/lora.h) split into its two steps:
//
//   shrink: h[t][r]  = sum_k x[t][k] * A[slot][r][k]                  r < rank(slot)
//   expand: y[t][o] += scaling(slot) * sum_r h[t][r] * B_t[slot][r][o]  r < rank(slot)
//
// SGMV takes the tokens grouped in segments by adapter slot (prefill); BGMV
// takes one slot per token (decode). Slot -1, and a slot of rank 0, leave a
// token alone: its h row is not written and its y row is not touched. Slots
// of different ranks mix in one call without padding: each slot's own rank
// bounds its loops, and h[t][r] for r >= rank(slot) is not written.
//
// Every pointer is device memory. The segment, slot and rank arrays live on
// the device, so their values cannot be checked here; the engine builds them
// from validated state. As a guard against reading out of bounds, a slot
// outside [0, num_slots) is treated as -1, ranks are clamped to max_rank, and
// segment bounds are clamped to [0, tokens).
#pragma once

#include <cstdint>

#include "common/status.h"

namespace loragate::cuda {

// The weights of one (layer, projection) across all slots, f32, stacked as
// in cpu::LoraSlotWeights.
struct LoraSlotsDevice {
  const float* a = nullptr;         // [num_slots][max_rank][in]
  const float* b_t = nullptr;       // [num_slots][max_rank][out]
  const int32_t* ranks = nullptr;   // [num_slots]
  const float* scalings = nullptr;  // [num_slots]
  int64_t num_slots = 0, in = 0, out = 0, max_rank = 0;
};

// `count` segments as three device arrays; segment s covers tokens
// [token_begin[s], token_end[s]); segments must not overlap (the expand
// step of overlapping ones would race on y).
struct SgmvSegmentsDevice {
  const int32_t* slot = nullptr;
  const int32_t* token_begin = nullptr;
  const int32_t* token_end = nullptr;
  int64_t count = 0;
};

// x: [tokens] rows of w.in floats, ldx apart; h: [tokens] rows of w.max_rank
// floats, ldh apart; y: [tokens] rows of w.out floats, ldy apart. `tokens` is
// the number of rows of x, h and y. Each launches on `stream` and returns at once.
Status sgmv_shrink(const float* x, int64_t ldx, int64_t tokens, const SgmvSegmentsDevice& segments,
                   const LoraSlotsDevice& w, float* h, int64_t ldh, void* stream);
Status sgmv_expand(const float* h, int64_t ldh, int64_t tokens, const SgmvSegmentsDevice& segments,
                   const LoraSlotsDevice& w, float* y, int64_t ldy, void* stream);

// Decode: token t uses slot token_slots[t] (a device array of `tokens`; -1 = none).
Status bgmv_shrink(const float* x, int64_t ldx, int64_t tokens, const int32_t* token_slots, const LoraSlotsDevice& w,
                   float* h, int64_t ldh, void* stream);
Status bgmv_expand(const float* h, int64_t ldh, int64_t tokens, const int32_t* token_slots, const LoraSlotsDevice& w,
                   float* y, int64_t ldy, void* stream);

}  // namespace loragate::cuda
