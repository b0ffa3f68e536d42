// Batched multi-LoRA (SGMV semantics) against a per-token, per-adapter
// double-precision reference over random segment layouts, ranks, sizes and
// slot maps; and bit-exact batch invariance.
#include <gtest/gtest.h>

#include <random>

#include "kernels/cpu/lora.h"

namespace loragate::cpu {
namespace {

struct Slots {
  int64_t num_slots, max_rank, in, out;
  std::vector<float> a, b_t, scalings;
  std::vector<int32_t> ranks;

  Slots(int64_t n, int64_t max_rank_, int64_t in_, int64_t out_, std::mt19937& rng)
      : num_slots(n), max_rank(max_rank_), in(in_), out(out_) {
    std::uniform_real_distribution<float> d(-0.5f, 0.5f);
    std::uniform_int_distribution<int32_t> rank(1, static_cast<int32_t>(max_rank));
    a.resize(n * max_rank * in);
    b_t.resize(n * max_rank * out);
    for (float& v : a) v = d(rng);
    for (float& v : b_t) v = d(rng);
    for (int64_t s = 0; s < n; ++s) {
      ranks.push_back(s == 1 ? 0 : rank(rng));  // slot 1 leaves this projection alone
      scalings.push_back(0.25f + 0.5f * static_cast<float>(s));
    }
  }
  LoraSlotWeights view() const { return {a.data(), b_t.data(), ranks.data(), scalings.data(), in, out, max_rank}; }
};

void reference(const std::vector<float>& x, const std::vector<LoraSegment>& segs, const Slots& s,
               std::vector<double>& y) {
  for (const LoraSegment& seg : segs) {
    if (seg.slot < 0) continue;
    const int32_t rank = s.ranks[seg.slot];
    for (int64_t t = seg.token_begin; t < seg.token_begin + seg.num_tokens; ++t) {
      for (int64_t o = 0; o < s.out; ++o) {
        double acc = 0;
        for (int32_t r = 0; r < rank; ++r) {
          double h = 0;
          for (int64_t k = 0; k < s.in; ++k) h += double(x[t * s.in + k]) * s.a[(seg.slot * s.max_rank + r) * s.in + k];
          acc += h * s.b_t[(seg.slot * s.max_rank + r) * s.out + o];
        }
        y[t * s.out + o] += s.scalings[seg.slot] * acc;
      }
    }
  }
}

// Random segments covering `tokens` tokens with random slots (-1 included).
std::vector<LoraSegment> random_segments(int64_t tokens, int64_t num_slots, std::mt19937& rng) {
  std::vector<LoraSegment> segs;
  std::uniform_int_distribution<int64_t> len(1, 6);
  std::uniform_int_distribution<int32_t> slot(-1, static_cast<int32_t>(num_slots) - 1);
  for (int64_t t = 0; t < tokens;) {
    const int64_t n = std::min(len(rng), tokens - t);
    segs.push_back({t, n, slot(rng)});
    t += n;
  }
  return segs;
}

TEST(LoraKernelTest, MatchesPerAdapterReference) {
  std::mt19937 rng(11);
  for (int64_t max_rank : {1, 4, 16, 64}) {
    for (auto [in, out] : {std::pair<int64_t, int64_t>{64, 64}, {64, 172}, {172, 64}, {768, 256}, {33, 17}}) {
      Slots s(5, max_rank, in, out, rng);
      const int64_t tokens = 23;
      std::vector<float> x(tokens * in);
      std::uniform_real_distribution<float> d(-1.0f, 1.0f);
      for (float& v : x) v = d(rng);
      const auto segs = random_segments(tokens, s.num_slots, rng);
      std::vector<float> y(tokens * out, 1.0f);
      std::vector<double> ref(y.begin(), y.end());
      lora_add(x.data(), in, segs.data(), static_cast<int64_t>(segs.size()), s.view(), y.data(), out);
      reference(x, segs, s, ref);
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_NEAR(y[i], ref[i], 1e-4 * (1 + std::abs(ref[i]))) << "rank " << max_rank << " in " << in << " out " << out;
      }
    }
  }
}

TEST(LoraKernelTest, EachTokenIsBitIdenticalToRunningItAlone) {
  std::mt19937 rng(12);
  Slots s(6, 16, 96, 80, rng);
  const int64_t tokens = 40;
  std::vector<float> x(tokens * s.in);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (float& v : x) v = d(rng);
  const auto segs = random_segments(tokens, s.num_slots, rng);
  std::vector<float> y(tokens * s.out, 0.5f);
  lora_add(x.data(), s.in, segs.data(), static_cast<int64_t>(segs.size()), s.view(), y.data(), s.out);
  for (const LoraSegment& seg : segs) {
    for (int64_t t = seg.token_begin; t < seg.token_begin + seg.num_tokens; ++t) {
      std::vector<float> alone(s.out, 0.5f);
      const LoraSegment one{0, 1, seg.slot};
      lora_add(x.data() + t * s.in, s.in, &one, 1, s.view(), alone.data(), s.out);
      for (int64_t o = 0; o < s.out; ++o) ASSERT_EQ(alone[o], y[t * s.out + o]) << "token " << t;
    }
  }
}

// A single token of a large projection is split across the pool's threads
// (rank rows, then output columns); a batch of several is not. Both give the
// same bits.
TEST(LoraKernelTest, ATokenSplitAcrossThreadsIsBitIdenticalToTheBatchedOne) {
  std::mt19937 rng(13);
  Slots s(3, 16, 1024, 1000, rng);  // 1000: the last column range is not whole vectors
  const int64_t tokens = 4;
  std::vector<float> x(tokens * s.in);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (float& v : x) v = d(rng);
  const std::vector<LoraSegment> segs = {{0, 2, 0}, {2, 2, 2}};
  std::vector<float> y(tokens * s.out, 0.5f);
  lora_add(x.data(), s.in, segs.data(), 2, s.view(), y.data(), s.out);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<float> alone(s.out, 0.5f);
    const LoraSegment one{0, 1, t < 2 ? 0 : 2};
    lora_add(x.data() + t * s.in, s.in, &one, 1, s.view(), alone.data(), s.out);
    for (int64_t o = 0; o < s.out; ++o) ASSERT_EQ(alone[o], y[t * s.out + o]) << "token " << t << " column " << o;
  }
}

// Several projections of one input in one call (q, k, v) give each what
// lora_add alone gives it, for a lone token (split across threads) and a batch.
TEST(LoraKernelTest, TargetsTogetherEqualEachAlone) {
  std::mt19937 rng(14);
  Slots q(3, 16, 512, 512, rng), k(3, 8, 512, 128, rng), v(3, 16, 512, 130, rng);
  std::vector<float> x(5 * 512);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (float& f : x) f = d(rng);
  for (const std::vector<LoraSegment>& segs :
       {std::vector<LoraSegment>{{0, 1, 2}}, std::vector<LoraSegment>{{0, 2, 0}, {2, 3, 2}}}) {
    const int64_t tokens = segs.back().token_begin + segs.back().num_tokens;
    const int64_t ldy = 512 + 128 + 130;
    std::vector<float> together(tokens * ldy, 0.25f), apart = together;
    const LoraTarget targets[3] = {{q.view(), together.data(), ldy},
                                   {k.view(), together.data() + 512, ldy},
                                   {v.view(), together.data() + 640, ldy}};
    lora_add_targets(x.data(), 512, segs.data(), static_cast<int64_t>(segs.size()), targets, 3);
    lora_add(x.data(), 512, segs.data(), static_cast<int64_t>(segs.size()), q.view(), apart.data(), ldy);
    lora_add(x.data(), 512, segs.data(), static_cast<int64_t>(segs.size()), k.view(), apart.data() + 512, ldy);
    lora_add(x.data(), 512, segs.data(), static_cast<int64_t>(segs.size()), v.view(), apart.data() + 640, ldy);
    ASSERT_EQ(together, apart) << tokens << " token(s)";
  }
}

TEST(LoraKernelTest, NoAdapterAndRankZeroLeaveOutputUntouched) {
  std::mt19937 rng(13);
  Slots s(3, 8, 32, 32, rng);
  std::vector<float> x(4 * 32, 1.0f), y(4 * 32, 2.0f);
  const std::vector<LoraSegment> segs = {{0, 2, -1}, {2, 2, 1}};  // slot 1 has rank 0
  lora_add(x.data(), 32, segs.data(), 2, s.view(), y.data(), 32);
  for (float v : y) EXPECT_EQ(v, 2.0f);
}

}  // namespace
}  // namespace loragate::cpu
