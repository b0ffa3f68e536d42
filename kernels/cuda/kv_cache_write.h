// Stores a step's K and V rows in the paged cache on the GPU, before the
// step's attention reads them (a prefill chunk attends to itself). The same
// placement as LlamaModel::attention's copy loop: token t at position p of
// sequence s goes to block block_tables[s][p / block_size], row p % block_size.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace loragate::cuda {

// k, v: `tokens` rows of `width` (= num_kv_heads * head_dim) floats, `ld`
// apart (in a fused QKV row they are views at the k and v offsets);
// token_seqs / positions: [tokens], each token's sequence and position;
// block_tables: [num_seqs, max_blocks_per_seq]; k_cache / v_cache:
// [num_blocks, block_size, width]. The indices live on the device and are
// not checked here: a position past its table or a block outside
// [0, num_blocks) writes nothing. Launches on `stream` and returns at once.
Status kv_cache_write(const float* k, const float* v, int64_t ld, int64_t tokens, int64_t width,
                      const int32_t* token_seqs, const int32_t* positions, const int32_t* block_tables,
                      int64_t max_blocks_per_seq, int64_t block_size, int64_t num_blocks, float* k_cache,
                      float* v_cache, void* stream);

}  // namespace loragate::cuda
