// KvCache: the key/value storage of every layer, in fixed-size blocks.
//
// Layout per layer: [num_blocks, block_size, num_kv_heads, head_dim] f32 for
// K and the same for V. Which sequence owns which block is the
// BlockManager's business; the cache is only memory. Owned by one engine.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "model/model_config.h"

namespace loragate {

class KvCache {
 public:
  // Sizes the pool: `num_blocks` if > 0, else as many blocks as fit in `budget_bytes`.
  static Result<KvCache> create(const ModelConfig& config, int32_t block_size, int32_t num_blocks,
                                int64_t budget_bytes);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  int64_t bytes() const;
  // Bytes one block takes across all layers, K and V.
  static int64_t bytes_per_block(const ModelConfig& config, int32_t block_size);

  float* k(int64_t layer) { return k_[layer].data(); }
  float* v(int64_t layer) { return v_[layer].data(); }
  // Floats between consecutive cached tokens (num_kv_heads * head_dim).
  int64_t token_stride() const { return token_stride_; }

 private:
  int32_t num_blocks_ = 0;
  int32_t block_size_ = 0;
  int64_t token_stride_ = 0;
  std::vector<std::vector<float>> k_, v_;
};

}  // namespace loragate
