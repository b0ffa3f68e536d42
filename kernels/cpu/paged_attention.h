// Paged attention on the CPU: one query token of one sequence, all heads,
// reading K/V from a block-paged cache.
//
// Every query is computed the same way whatever else is in the batch (the
// dot products, the softmax and the weighted sum run in a fixed order), so
// batched results equal one-at-a-time results bit for bit, and every ISA
// follows that order (lane_kernels.h), so they are the same on every CPU.
#pragma once

#include <cstdint>

namespace loragate::cpu {

// The K/V cache of one layer: [num_blocks, block_size, num_kv_heads, head_dim]
// each; the token at position p lives in block block_table[p / block_size],
// row p % block_size.
struct PagedKv {
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t block_size = 16;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
};

// q: [num_heads, head_dim]; out: [num_heads, head_dim].
// Attends to positions [first_pos, last_pos] (inclusive; the caller applies
// causality and any sliding window through them) with scale 1/sqrt(head_dim).
// Query head h reads KV head h / (num_heads / num_kv_heads) (GQA).
// `scratch` must hold last_pos - first_pos + 1 floats.
void paged_attention_one(const float* q, float* out, int64_t num_heads, const PagedKv& kv,
                         const int32_t* block_table, int64_t first_pos, int64_t last_pos, float* scratch);

}  // namespace loragate::cpu
