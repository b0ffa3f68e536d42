// The BlockManager's prefix cache: holders, the idle LRU, eviction order,
// duplicates and reset; and the hash chain's keys (engine/prefix_hash.h).
#include <gtest/gtest.h>

#include <set>

#include "engine/block_manager.h"
#include "engine/prefix_hash.h"

namespace loragate {
namespace {

// The chain of `n` blocks whose block i holds the tokens {first + i, first + i + 1}.
std::vector<BlockHash> chain_of(int first, int n) {
  std::vector<BlockHash> c;
  BlockHash parent = prefix_chain_root("engine", "", "");
  for (int i = 0; i < n; ++i) {
    const int32_t tokens[2] = {first + i, first + i + 1};
    c.push_back(parent = next_block_hash(parent, tokens, 2));
  }
  return c;
}

// A table of `n` blocks registered as chain_of(first, n).
BlockTable cached_table(BlockManager& bm, int first, int n) {
  BlockTable t;
  EXPECT_TRUE(bm.grow(t, static_cast<int64_t>(n) * bm.block_size()).is_ok());
  const std::vector<BlockHash> chain = chain_of(first, n);
  for (int i = 0; i < n; ++i) bm.register_full(t[i], chain[i]);
  return t;
}

TEST(PrefixBlockTest, ReleasedCachedBlocksStayFindableAndCountAsFree) {
  BlockManager bm(8, 4, true);
  BlockTable a = cached_table(bm, 0, 3);
  EXPECT_EQ(bm.num_cached(), 3);
  bm.release(a);
  EXPECT_EQ(bm.num_free(), 8);  // idle cached blocks may be handed out
  EXPECT_EQ(bm.match(chain_of(0, 3), 3), 3);
  EXPECT_EQ(bm.match(chain_of(0, 3), 2), 2);
  EXPECT_EQ(bm.match(chain_of(1, 2), 2), 0);  // the same tokens after another parent are other blocks

  BlockTable b;
  bm.share(b, chain_of(0, 3), 2);
  EXPECT_EQ(b.size(), 2u);
  EXPECT_EQ(bm.num_free(), 6);  // two idle blocks are held again
  BlockTable c;
  bm.share(c, chain_of(0, 3), 3);  // two of them held already: only the third leaves the free count
  EXPECT_EQ(bm.num_free(), 5);
}

TEST(PrefixBlockTest, SharedBlocksReturnOnlyWithTheLastHolder) {
  BlockManager bm(4, 4, true);
  BlockTable a = cached_table(bm, 0, 2);
  BlockTable b;
  bm.share(b, chain_of(0, 2), 2);
  EXPECT_EQ(a, b);
  EXPECT_EQ(bm.num_free(), 2);
  bm.release(a);
  EXPECT_EQ(bm.num_free(), 2);  // b still holds both
  bm.release(b);
  EXPECT_EQ(bm.num_free(), 4);
}

TEST(PrefixBlockTest, NeverCachedBlocksGoFirstThenTheLeastRecentTailsAreEvicted) {
  BlockManager bm(5, 4, true);
  BlockTable a = cached_table(bm, 0, 2);   // chain 0, 1
  BlockTable b = cached_table(bm, 10, 2);  // chain 10, 11
  bm.release(a);
  bm.release(b);
  BlockTable c;
  ASSERT_TRUE(bm.grow(c, 4).is_ok());  // the never-cached block
  EXPECT_EQ(bm.num_cached(), 4);
  ASSERT_TRUE(bm.grow(c, 8).is_ok());  // evicts a's tail first: a was released before b
  EXPECT_EQ(bm.match(chain_of(0, 2), 2), 1);
  EXPECT_EQ(bm.match(chain_of(10, 2), 2), 2);
  ASSERT_TRUE(bm.grow(c, 12).is_ok());  // then a's head
  EXPECT_EQ(bm.match(chain_of(0, 2), 2), 0);
  EXPECT_EQ(bm.match(chain_of(10, 2), 2), 2);
  EXPECT_EQ(bm.num_free(), 2);
  EXPECT_EQ(bm.grow(c, 24).code(), StatusCode::kResourceExhausted);
}

TEST(PrefixBlockTest, AnEqualBlockStaysPrivateAndIsFreedNotCached) {
  BlockManager bm(4, 4, true);
  BlockTable a = cached_table(bm, 0, 1);
  BlockTable b = cached_table(bm, 0, 1);  // computed twice, cold: the same hash
  const int32_t first = a[0];
  ASSERT_NE(first, b[0]);
  EXPECT_EQ(bm.num_cached(), 1);
  bm.release(a);
  bm.release(b);
  EXPECT_EQ(bm.num_cached(), 1);
  BlockTable c;
  bm.share(c, chain_of(0, 1), 1);
  EXPECT_EQ(c[0], first);  // the one registered first is the one found
  EXPECT_EQ(bm.num_free(), 3);
}

TEST(PrefixBlockTest, ResetForgetsEveryHashAndFreesIdleBlocks) {
  BlockManager bm(6, 4, true);
  BlockTable held = cached_table(bm, 0, 2);
  BlockTable idle = cached_table(bm, 20, 2);
  bm.release(idle);
  bm.reset_cache();
  EXPECT_EQ(bm.num_cached(), 0);
  EXPECT_EQ(bm.match(chain_of(0, 2), 2), 0);
  EXPECT_EQ(bm.match(chain_of(20, 2), 2), 0);
  EXPECT_EQ(bm.num_free(), 4);
  bm.release(held);  // private now: back to the pool, not to the cache
  EXPECT_EQ(bm.num_free(), 6);
  EXPECT_EQ(bm.num_cached(), 0);
}

TEST(PrefixBlockTest, OffMeansNothingIsFound) {
  BlockManager bm(4, 4, false);
  BlockTable a = cached_table(bm, 0, 2);
  EXPECT_EQ(bm.num_cached(), 0);
  EXPECT_EQ(bm.match(chain_of(0, 2), 2), 0);
}

TEST(PrefixBlockTest, HandsOutEveryBlockOnceUnderChurn) {
  BlockManager bm(16, 2, true);
  std::vector<BlockTable> tables(6);
  for (int round = 0; round < 200; ++round) {
    BlockTable& t = tables[round % tables.size()];
    bm.release(t);
    const int first = (round * 7) % 5;
    const int n = 1 + round % 3;
    const int32_t found = bm.match(chain_of(first, n), n);
    bm.share(t, chain_of(first, n), found);
    if (!bm.grow(t, static_cast<int64_t>(n) * 2).is_ok()) continue;
    const std::vector<BlockHash> chain = chain_of(first, n);
    for (int i = found; i < n; ++i) bm.register_full(t[i], chain[i]);
    std::set<int32_t> held;  // shared blocks appear in several tables, once here
    for (const BlockTable& x : tables) held.insert(x.begin(), x.end());
    EXPECT_EQ(bm.num_used(), static_cast<int32_t>(held.size())) << "round " << round;
  }
}

TEST(PrefixHashTest, EveryPartOfTheKeyChangesTheRoot) {
  const std::string key = prefix_engine_key("aa", "bf16", "{}", 16);
  EXPECT_NE(key, prefix_engine_key("ab", "bf16", "{}", 16));
  EXPECT_NE(key, prefix_engine_key("aa", "f32", "{}", 16));
  EXPECT_NE(key, prefix_engine_key("aa", "bf16", "{\"rope_theta\": 1}", 16));
  EXPECT_NE(key, prefix_engine_key("aa", "bf16", "{}", 32));
  const BlockHash root = prefix_chain_root(key, "", "");
  EXPECT_EQ(root, prefix_chain_root(key, "", ""));
  EXPECT_NE(root, prefix_chain_root(key, "adapter-sha", ""));
  EXPECT_NE(root, prefix_chain_root(key, "", "tenant"));
  EXPECT_NE(root, prefix_chain_root(key, "none", "nosalt"));  // fields cannot run into each other
  EXPECT_NE(prefix_chain_root(key, "ab", "c"), prefix_chain_root(key, "a", "bc"));
}

TEST(PrefixHashTest, ABlockHashCoversItsParentAndEveryToken) {
  const BlockHash root = prefix_chain_root("k", "", "");
  const int32_t a[3] = {1, 2, 3}, b[3] = {1, 2, 4}, big[3] = {1, 2, 3 + (1 << 24)};
  EXPECT_EQ(next_block_hash(root, a, 3), next_block_hash(root, a, 3));
  EXPECT_NE(next_block_hash(root, a, 3), next_block_hash(root, b, 3));
  EXPECT_NE(next_block_hash(root, a, 3), next_block_hash(root, big, 3));
  EXPECT_NE(next_block_hash(root, a, 3), next_block_hash(next_block_hash(root, a, 3), a, 3));
  std::vector<int32_t> many(300, 7);  // more than one internal buffer of tokens
  many[299] = 8;
  const BlockHash h = next_block_hash(root, many.data(), 300);
  many[299] = 7;
  EXPECT_NE(h, next_block_hash(root, many.data(), 300));
}

}  // namespace
}  // namespace loragate
