#include "engine/kv_cache.h"

#include <string>

namespace loragate {

int64_t KvCache::bytes_per_block(const ModelConfig& config, int32_t block_size) {
  return 2 * config.num_hidden_layers * block_size * config.num_key_value_heads * config.head_dim *
         static_cast<int64_t>(sizeof(float));
}

Result<KvCache> KvCache::create(const ModelConfig& config, int32_t block_size, int32_t num_blocks,
                                int64_t budget_bytes) {
  if (block_size <= 0) return Status::invalid_argument("kv block_size must be positive");
  const int64_t per_block = bytes_per_block(config, block_size);
  if (num_blocks <= 0) num_blocks = static_cast<int32_t>(budget_bytes / per_block);
  if (num_blocks <= 0) {
    return Status::invalid_argument("KV budget of " + std::to_string(budget_bytes) +
                                    " bytes holds no block (one block takes " + std::to_string(per_block) + ")");
  }
  KvCache cache;
  cache.num_blocks_ = num_blocks;
  cache.block_size_ = block_size;
  cache.token_stride_ = config.num_key_value_heads * config.head_dim;
  const size_t per_layer = static_cast<size_t>(num_blocks) * block_size * cache.token_stride_;
  cache.k_.assign(config.num_hidden_layers, std::vector<float>(per_layer));
  cache.v_.assign(config.num_hidden_layers, std::vector<float>(per_layer));
  return cache;
}

int64_t KvCache::bytes() const {
  return static_cast<int64_t>(k_.size()) * 2 * num_blocks_ * block_size_ * token_stride_ *
         static_cast<int64_t>(sizeof(float));
}

}  // namespace loragate
