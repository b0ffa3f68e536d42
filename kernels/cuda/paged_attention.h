// Decode attention on the GPU: one query token per sequence, all heads,
// reading K/V from a block-paged f32 cache. Per (sequence, head) it computes
// what cpu::paged_attention_one (kernels/cpu/paged_attention.h) does, with
// first_pos = max(0, len - window) (0 when there is no window) and
// last_pos = len - 1, though in a different summation order.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace loragate::cuda {

// One layer's cache: k and v are [num_blocks, block_size, num_kv_heads, head_dim];
// position p of a sequence lives in block block_table[p / block_size], row p % block_size.
struct PagedKvDevice {
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t num_blocks = 0;
  int64_t block_size = 16;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
};

// q, out: [num_seqs, num_heads, head_dim]; block_tables: [num_seqs, max_blocks_per_seq];
// context_lens: [num_seqs], each the number of positions in the cache. Query
// head h reads KV head h / (num_heads / num_kv_heads) (GQA); the scale is
// 1/sqrt(head_dim). sliding_window > 0 attends to the last `sliding_window`
// positions only; 0 attends to all.
//
// The tables and lengths live on the device, so they are not checked here
// (the engine's block manager builds them). As a guard against reading out of
// bounds, a length is clamped to max_blocks_per_seq * block_size, a block id
// outside [0, num_blocks) contributes nothing, and a sequence of length <= 0
// gets zeros. head_dim is at most 256. Launches on `stream` and returns at once.
Status paged_attention_decode(const float* q, float* out, int64_t num_seqs, int64_t num_heads, const PagedKvDevice& kv,
                              const int32_t* block_tables, int64_t max_blocks_per_seq, const int32_t* context_lens,
                              int64_t sliding_window, void* stream);

}  // namespace loragate::cuda
