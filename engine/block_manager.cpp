#include "engine/block_manager.h"

#include <algorithm>
#include <string>

namespace loragate {

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size, bool prefix_caching)
    : num_blocks_(num_blocks), block_size_(block_size), prefix_caching_(prefix_caching) {
  state_.resize(static_cast<size_t>(num_blocks));
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int32_t BlockManager::blocks_needed(const BlockTable& table, int64_t num_tokens) const {
  const int64_t want = (num_tokens + block_size_ - 1) / block_size_;
  return want > static_cast<int64_t>(table.size()) ? static_cast<int32_t>(want - table.size()) : 0;
}

int32_t BlockManager::take_block() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    b = idle_.front();  // evicted: its K/V are about to be overwritten
    uncache(b);
    idle_.pop_front();
  }
  state_[b].holders = 1;
  return b;
}

Status BlockManager::grow(BlockTable& table, int64_t num_tokens) {
  const int32_t need = blocks_needed(table, num_tokens);
  if (need > num_free()) {
    return Status::resource_exhausted("KV cache: " + std::to_string(need) + " blocks needed, " +
                                      std::to_string(num_free()) + " free of " + std::to_string(num_blocks_));
  }
  for (int32_t i = 0; i < need; ++i) table.push_back(take_block());
  return Status::ok();
}

void BlockManager::drop(int32_t block) {
  BlockState& s = state_[block];
  if (--s.holders > 0) return;
  if (s.cached) {
    s.idle_at = idle_.insert(idle_.end(), block);
  } else {
    free_.push_back(block);
  }
}

void BlockManager::release(BlockTable& table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    if (*it != kNoBlock) drop(*it);
  }
  table.clear();
}

void BlockManager::release_before(BlockTable& table, int64_t position) {
  const int64_t whole = std::min<int64_t>(position / block_size_, static_cast<int64_t>(table.size()));
  for (int64_t i = whole - 1; i >= 0; --i) {
    if (table[i] != kNoBlock) {
      drop(table[i]);
      table[i] = kNoBlock;
    }
  }
}

int32_t BlockManager::match(const std::vector<BlockHash>& chain, int32_t max_blocks) const {
  if (!prefix_caching_) return 0;
  const int32_t limit = std::min(max_blocks, static_cast<int32_t>(chain.size()));
  int32_t n = 0;
  while (n < limit && cached_.count(chain[n]) != 0) ++n;
  return n;
}

void BlockManager::share(BlockTable& table, const std::vector<BlockHash>& chain, int32_t n) {
  for (int32_t i = 0; i < n; ++i) {
    const int32_t b = cached_.at(chain[i]);
    BlockState& s = state_[b];
    if (s.holders++ == 0) idle_.erase(s.idle_at);
    table.push_back(b);
  }
}

void BlockManager::register_full(int32_t block, const BlockHash& hash) {
  if (!prefix_caching_ || state_[block].cached) return;
  if (!cached_.emplace(hash, block).second) return;  // an equal block is cached already
  state_[block].cached = true;
  state_[block].hash = hash;
}

void BlockManager::uncache(int32_t block) {
  BlockState& s = state_[block];
  cached_.erase(s.hash);
  s.cached = false;
}

void BlockManager::reset_cache() {
  for (int32_t b : idle_) {
    uncache(b);
    free_.push_back(b);
  }
  idle_.clear();
  for (auto& [hash, block] : std::vector<std::pair<BlockHash, int32_t>>(cached_.begin(), cached_.end())) uncache(block);
}

}  // namespace loragate
