#include "engine/block_manager.h"

#include <string>

namespace loragate {

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int32_t BlockManager::blocks_needed(const BlockTable& table, int64_t num_tokens) const {
  const int64_t want = (num_tokens + block_size_ - 1) / block_size_;
  return want > static_cast<int64_t>(table.size()) ? static_cast<int32_t>(want - table.size()) : 0;
}

Status BlockManager::grow(BlockTable& table, int64_t num_tokens) {
  const int32_t need = blocks_needed(table, num_tokens);
  if (need > num_free()) {
    return Status::resource_exhausted("KV cache: " + std::to_string(need) + " blocks needed, " +
                                      std::to_string(num_free()) + " free of " + std::to_string(num_blocks_));
  }
  for (int32_t i = 0; i < need; ++i) {
    table.push_back(free_.back());
    free_.pop_back();
  }
  return Status::ok();
}

void BlockManager::release(BlockTable& table) {
  for (int32_t b : table) {
    if (b != kNoBlock) free_.push_back(b);
  }
  table.clear();
}

void BlockManager::release_before(BlockTable& table, int64_t position) {
  const int64_t whole = std::min<int64_t>(position / block_size_, static_cast<int64_t>(table.size()));
  for (int64_t i = 0; i < whole; ++i) {
    if (table[i] != kNoBlock) {
      free_.push_back(table[i]);
      table[i] = kNoBlock;
    }
  }
}

}  // namespace loragate
