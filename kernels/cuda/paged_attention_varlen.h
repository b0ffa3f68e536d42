// Paged attention on the GPU for any mix of prefill chunks and decode
// tokens: one query per token, all heads, reading K/V from the block-paged
// f32 cache. Per (token, head) it computes what cpu::paged_attention_one
// (kernels/cpu/paged_attention.h) does for LlamaModel::attention: positions
// [first, pos] of the token's sequence, first = max(0, pos - window + 1)
// with a sliding window and 0 without, though in a different summation order
// (an online softmax). A decode step is one token per sequence at pos = len - 1.
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

// q: `tokens` rows of num_heads * head_dim floats, `ldq` apart (a fused QKV
// row works as is); out: rows `ldo` apart. token_seqs / positions: [tokens],
// each token's sequence (its row of block_tables) and position;
// block_tables: [num_seqs, max_blocks_per_seq]. Query head h reads KV head
// h / (num_heads / num_kv_heads) (GQA); the scale is 1/sqrt(head_dim). The
// step's own K/V must already be in the cache (kv_cache_write.h).
//
// The indices live on the device and are not checked here: a position is
// clamped to the table's max_blocks_per_seq * block_size - 1, a block id
// outside [0, num_blocks) contributes nothing, and a negative position gets
// zeros. head_dim is at most 256. Launches on `stream` and returns at once.
Status paged_attention_varlen(const float* q, int64_t ldq, float* out, int64_t ldo, int64_t tokens, int64_t num_heads,
                              const PagedKvDevice& kv, const int32_t* block_tables, int64_t max_blocks_per_seq,
                              const int32_t* token_seqs, const int32_t* positions, int64_t sliding_window,
                              void* stream);

}  // namespace loragate::cuda
