// BlockManager: hands out fixed-size KV-cache blocks from a pool, and keeps
// the full ones findable by their prefix hash (the prefix cache).
//
// It only allocates; policy (who runs, who is preempted) is the scheduler's.
// A sequence's blocks are listed in its BlockTable: entry i holds the tokens
// at positions [i * block_size, (i + 1) * block_size). Entries released by a
// sliding window become kNoBlock.
//
// Prefix cache: a full block whose K/V are computed can be registered under
// its BlockHash (engine/prefix_hash.h); later sequences find it with
// match() and share it with share(). Blocks are reference-counted: a shared
// block is read-only (no sequence writes a position it did not compute) and
// returns to the pool when its last holder lets go. A cached block nobody
// holds stays findable, in an LRU, until its memory is needed: grow() takes
// never-cached free blocks first and evicts the least recently freed cached
// one only when none is left. Releasing a table frees its blocks last to
// first, so a chain's tail is evicted before its head (a head is what the
// next request shares). Not thread-safe: the step loop owns it.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "engine/prefix_hash.h"

namespace loragate {

using BlockTable = std::vector<int32_t>;
inline constexpr int32_t kNoBlock = -1;

class BlockManager {
 public:
  BlockManager(int32_t num_blocks, int32_t block_size, bool prefix_caching = false);
  BlockManager(const BlockManager&) = delete;
  BlockManager& operator=(const BlockManager&) = delete;

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return num_blocks_; }
  bool prefix_caching() const { return prefix_caching_; }
  // Blocks grow() may hand out: never used, or cached with no holder.
  int32_t num_free() const { return static_cast<int32_t>(free_.size() + idle_.size()); }
  int32_t num_used() const { return num_blocks_ - num_free(); }
  // Blocks findable by hash, held or idle.
  int32_t num_cached() const { return static_cast<int32_t>(cached_.size()); }

  // Blocks `table` still needs to hold `num_tokens` tokens.
  int32_t blocks_needed(const BlockTable& table, int64_t num_tokens) const;
  bool can_grow(const BlockTable& table, int64_t num_tokens) const {
    return blocks_needed(table, num_tokens) <= num_free();
  }
  // Grows `table` to hold `num_tokens` tokens. All or nothing: on
  // resource_exhausted the table is unchanged.
  Status grow(BlockTable& table, int64_t num_tokens);
  // Drops the table's hold on each of its blocks (last to first) and clears it.
  void release(BlockTable& table);
  // Releases the blocks wholly before `position` (sliding window); their
  // entries become kNoBlock so later positions keep their indices.
  void release_before(BlockTable& table, int64_t position);

  // --- prefix cache (no-ops, and match() 0, when prefix caching is off) ---
  // How many of `chain`'s first blocks (at most `max_blocks`) are cached, in a row.
  int32_t match(const std::vector<BlockHash>& chain, int32_t max_blocks) const;
  // Appends the cached blocks of chain[0, n) to the empty `table`, holding each.
  // n must not exceed match(chain, n).
  void share(BlockTable& table, const std::vector<BlockHash>& chain, int32_t n);
  // Records that `block`, now full and computed, has K/V identified by
  // `hash`. When another block already has that hash, this one stays
  // private (freed, not cached, when released).
  void register_full(int32_t block, const BlockHash& hash);
  // Forgets every hash: idle cached blocks become free, held ones private.
  void reset_cache();

 private:
  struct BlockState {
    int32_t holders = 0;
    bool cached = false;  // findable: cached_[hash] == this block
    BlockHash hash;
    std::list<int32_t>::iterator idle_at;  // its place in idle_, while cached and unheld
  };
  int32_t take_block();      // a free block, else the least recently idle cached one (evicted)
  void drop(int32_t block);  // one holder less
  void uncache(int32_t block);

  int32_t num_blocks_;
  int32_t block_size_;
  bool prefix_caching_;
  std::vector<BlockState> state_;
  std::vector<int32_t> free_;  // never cached, unheld; a stack: the most recently freed is reused first
  std::list<int32_t> idle_;    // cached, unheld; least recently released at the front
  std::unordered_map<BlockHash, int32_t, BlockHashHasher> cached_;
};

}  // namespace loragate
