#include "engine/block_manager.h"

#include <gtest/gtest.h>

#include <set>

namespace loragate {
namespace {

TEST(BlockManagerTest, GrowsInWholeBlocksAndReleases) {
  BlockManager bm(8, 16);
  BlockTable t;
  EXPECT_EQ(bm.blocks_needed(t, 1), 1);
  EXPECT_EQ(bm.blocks_needed(t, 16), 1);
  EXPECT_EQ(bm.blocks_needed(t, 17), 2);
  ASSERT_TRUE(bm.grow(t, 33).is_ok());
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(bm.num_free(), 5);
  ASSERT_TRUE(bm.grow(t, 40).is_ok());  // still inside the third block
  EXPECT_EQ(t.size(), 3u);
  bm.release(t);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(bm.num_free(), 8);
}

TEST(BlockManagerTest, ExhaustionIsReportedAndAllOrNothing) {
  BlockManager bm(4, 16);
  BlockTable a, b;
  ASSERT_TRUE(bm.grow(a, 48).is_ok());
  Status s = bm.grow(b, 32);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("2 blocks needed, 1 free"), std::string::npos) << s.message();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(bm.num_free(), 1);
  EXPECT_FALSE(bm.can_grow(b, 17));
  EXPECT_TRUE(bm.can_grow(b, 16));
}

TEST(BlockManagerTest, BlocksAreNeverHandedOutTwice) {
  BlockManager bm(64, 4);
  std::vector<BlockTable> tables(8);
  for (int round = 0; round < 20; ++round) {
    for (size_t i = 0; i < tables.size(); ++i) {
      if ((round + i) % 3 == 0) bm.release(tables[i]);
      else (void)bm.grow(tables[i], static_cast<int64_t>(tables[i].size() * 4 + 5));
    }
    std::set<int32_t> seen;
    size_t held = 0;
    for (const BlockTable& t : tables) {
      for (int32_t b : t) {
        EXPECT_TRUE(seen.insert(b).second) << "block " << b << " owned twice";
        ++held;
      }
    }
    EXPECT_EQ(static_cast<int32_t>(held), bm.num_used());
  }
}

TEST(BlockManagerTest, SlidingWindowReleasesWholeBlocksOnly) {
  BlockManager bm(8, 4);
  BlockTable t;
  ASSERT_TRUE(bm.grow(t, 16).is_ok());
  bm.release_before(t, 9);  // positions 0..8 unneeded: blocks 0 and 1 go, block 2 (8..11) stays
  EXPECT_EQ(t[0], kNoBlock);
  EXPECT_EQ(t[1], kNoBlock);
  EXPECT_NE(t[2], kNoBlock);
  EXPECT_EQ(bm.num_free(), 6);
  bm.release(t);
  EXPECT_EQ(bm.num_free(), 8);
}

}  // namespace
}  // namespace loragate
