// BlockManager: hands out fixed-size KV-cache blocks from a pool.
//
// It only allocates; policy (who runs, who is preempted) is the scheduler's.
// A sequence's blocks are listed in its BlockTable: entry i holds the tokens
// at positions [i * block_size, (i + 1) * block_size). Entries released by a
// sliding window become kNoBlock. Not thread-safe: the step loop owns it.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace loragate {

using BlockTable = std::vector<int32_t>;
inline constexpr int32_t kNoBlock = -1;

class BlockManager {
 public:
  BlockManager(int32_t num_blocks, int32_t block_size);
  BlockManager(const BlockManager&) = delete;
  BlockManager& operator=(const BlockManager&) = delete;

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return num_blocks_; }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_used() const { return num_blocks_ - num_free(); }

  // Blocks `table` still needs to hold `num_tokens` tokens.
  int32_t blocks_needed(const BlockTable& table, int64_t num_tokens) const;
  bool can_grow(const BlockTable& table, int64_t num_tokens) const {
    return blocks_needed(table, num_tokens) <= num_free();
  }
  // Grows `table` to hold `num_tokens` tokens. All or nothing: on
  // resource_exhausted the table is unchanged.
  Status grow(BlockTable& table, int64_t num_tokens);
  // Returns every block of `table` to the pool and clears it.
  void release(BlockTable& table);
  // Releases the blocks wholly before `position` (sliding window); their
  // entries become kNoBlock so later positions keep their indices.
  void release_before(BlockTable& table, int64_t position);

 private:
  int32_t num_blocks_;
  int32_t block_size_;
  std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
};

}  // namespace loragate
