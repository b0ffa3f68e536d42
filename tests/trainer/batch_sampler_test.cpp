// BatchSampler: deterministic from the seed, seek(n) equal to drawing n
// micro-batches, indices in range, shuffle epochs that draw every example
// once, replacement draws that are uniform.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "trainer/train_data.h"

namespace loragate::train {
namespace {

constexpr Sampling kBothSamplings[] = {Sampling::kReplacement, Sampling::kShuffle};

std::vector<std::vector<int64_t>> draw(BatchSampler& sampler, int count) {
  std::vector<std::vector<int64_t>> out;
  for (int i = 0; i < count; ++i) out.push_back(sampler.next());
  return out;
}

TEST(BatchSampler, SameSeedSameOrderOtherSeedOtherOrder) {
  for (Sampling sampling : kBothSamplings) {
    BatchSampler a(37, 5, 7000, sampling), b(37, 5, 7000, sampling), c(37, 5, 7001, sampling);
    const auto first = draw(a, 30);
    EXPECT_EQ(first, draw(b, 30));
    EXPECT_NE(first, draw(c, 30));
    EXPECT_EQ(a.position(), 30);
  }
  // The two samplings are different orders, not one order under two names.
  BatchSampler r(37, 5, 7000, Sampling::kReplacement), s(37, 5, 7000, Sampling::kShuffle);
  EXPECT_NE(draw(r, 10), draw(s, 10));
}

TEST(BatchSampler, EveryBatchHasBatchIndicesInRange) {
  for (Sampling sampling : kBothSamplings) {
    for (int64_t n : {1, 2, 7, 300}) {
      for (int64_t batch : {1, 3, 16}) {
        BatchSampler sampler(n, batch, 42, sampling);
        for (const auto& indices : draw(sampler, 50)) {
          ASSERT_EQ(static_cast<int64_t>(indices.size()), batch);
          for (int64_t i : indices) ASSERT_TRUE(i >= 0 && i < n) << i << " of " << n;
        }
      }
    }
  }
}

TEST(BatchSampler, SeekNThenNextIsTheNPlusFirstBatch) {
  for (Sampling sampling : kBothSamplings) {
    for (int64_t n : {1, 7, 10, 64}) {
      for (int64_t batch : {1, 3, 4, 16}) {
        BatchSampler fresh(n, batch, 99, sampling);
        const auto order = draw(fresh, 60);
        BatchSampler resumed(n, batch, 99, sampling);
        // Forward, backward and repeated seeks, across epoch boundaries.
        for (int64_t at : {0, 5, 59, 1, 17, 17, 40, 2, 33}) {
          resumed.seek(at);
          EXPECT_EQ(resumed.position(), at);
          EXPECT_EQ(resumed.next(), order[static_cast<size_t>(at)]) << "n " << n << " batch " << batch << " at " << at;
          EXPECT_EQ(resumed.position(), at + 1);
        }
        // After a seek, the following batches continue the same order.
        resumed.seek(20);
        for (size_t i = 20; i < order.size(); ++i) ASSERT_EQ(resumed.next(), order[i]);
      }
    }
  }
  BatchSampler sampler(10, 3, 1, Sampling::kShuffle);
  sampler.seek(-4);
  EXPECT_EQ(sampler.position(), 0);
}

TEST(BatchSampler, SeekFarIsCheapAndExact) {
  for (Sampling sampling : kBothSamplings) {
    BatchSampler a(1000, 16, 5, sampling), b(1000, 16, 5, sampling);
    a.seek(10'000'000);  // 160 million examples on: O(1) or one permutation
    b.seek(9'999'999);
    b.next();
    EXPECT_EQ(a.next(), b.next());
  }
}

TEST(BatchSampler, ShuffleDrawsEveryExampleOncePerEpoch) {
  for (int64_t batch : {1, 3, 10, 7}) {
    const int64_t n = 10;
    BatchSampler sampler(n, batch, 123, Sampling::kShuffle);
    std::vector<int64_t> stream;
    while (static_cast<int64_t>(stream.size()) < 6 * n) {
      for (int64_t i : sampler.next()) stream.push_back(i);
    }
    std::vector<std::vector<int64_t>> epochs;
    for (int64_t e = 0; e < 6; ++e) {
      std::vector<int64_t> epoch(stream.begin() + e * n, stream.begin() + (e + 1) * n);
      std::vector<int64_t> sorted = epoch;
      std::sort(sorted.begin(), sorted.end());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i) << "epoch " << e;
      epochs.push_back(epoch);
    }
    // Reshuffled each epoch (six equal permutations of ten would be a broken seed).
    EXPECT_NE(std::count(epochs.begin(), epochs.end(), epochs[0]), 6);
  }
}

TEST(BatchSampler, ReplacementRepeatsAndIsUniform) {
  BatchSampler small(5, 8, 11, Sampling::kReplacement);
  const std::vector<int64_t> batch = small.next();
  std::vector<int64_t> sorted = batch;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());  // 8 draws of 5: a repeat

  const int64_t n = 10;
  BatchSampler sampler(n, 10, 2024, Sampling::kReplacement);
  std::vector<int64_t> counts(n, 0);
  for (int i = 0; i < 1000; ++i) {
    for (int64_t x : sampler.next()) ++counts[static_cast<size_t>(x)];
  }
  // 10,000 draws: each count is 1000 +- 30 (one standard deviation); allow five.
  for (int64_t c : counts) EXPECT_TRUE(c > 850 && c < 1150) << c;
}

TEST(BatchSampler, NoExamplesGiveNoIndices) {
  BatchSampler none(0, 4, 1, Sampling::kShuffle), no_batch(5, 0, 1, Sampling::kReplacement);
  EXPECT_TRUE(none.next().empty());
  EXPECT_TRUE(no_batch.next().empty());
}

}  // namespace
}  // namespace loragate::train
