// The CUDA SGMV and BGMV (shrink then expand) against cpu::lora_add on random
// mixes of slots and ranks 1..64, slot -1 included; skips cleanly without a
// GPU. The dot products sum in a different order from the CPU's, so 1e-5
// relative (plus 1e-5 absolute: values are O(1)).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/lora.h"
#include "kernels/cuda/sgmv.h"
#include "tests/cuda/cuda_test_util.h"

namespace loragate {
namespace {

using cuda_test::ptr;

struct Case {
  int64_t tokens = 0, in = 0, out = 0, num_slots = 0, max_rank = 64, ldx = 0, ldy = 0;
  std::vector<float> x, a, b_t, scalings, y0;
  std::vector<int32_t> ranks;
  std::vector<cpu::LoraSegment> segments;
};

Case random_case(std::mt19937& rng) {
  Case c;
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  c.tokens = uniform(1, 90);
  c.in = uniform(1, 700);
  c.out = uniform(1, 900);
  c.num_slots = uniform(1, 6);
  c.ldx = c.in + uniform(0, 5);
  c.ldy = c.out + uniform(0, 5);
  c.ranks.resize(c.num_slots);
  for (int32_t& r : c.ranks) r = static_cast<int32_t>(uniform(1, c.max_rank));
  if (c.num_slots > 2) c.ranks[1] = 0;  // a slot with nothing at this projection
  c.ranks[0] = static_cast<int32_t>(c.max_rank);
  c.scalings.resize(c.num_slots);
  for (float& s : c.scalings) s = 0.25f + 2.0f * (dist(rng) + 1.0f);
  // Scaled so h and the update stay O(1) whatever in and rank are.
  c.a.resize(c.num_slots * c.max_rank * c.in);
  for (float& v : c.a) v = dist(rng) / std::sqrt(static_cast<float>(c.in));
  c.b_t.resize(c.num_slots * c.max_rank * c.out);
  for (float& v : c.b_t) v = dist(rng) / static_cast<float>(c.max_rank);
  c.x.resize(c.tokens * c.ldx);
  for (float& v : c.x) v = dist(rng);
  c.y0.resize(c.tokens * c.ldy);
  for (float& v : c.y0) v = dist(rng);
  // Consecutive segments of random lengths and slots, -1 among them.
  for (int64_t t = 0; t < c.tokens;) {
    const int64_t n = std::min(c.tokens - t, uniform(1, 20));
    c.segments.push_back({t, n, static_cast<int32_t>(uniform(-1, c.num_slots - 1))});
    t += n;
  }
  return c;
}

std::vector<float> cpu_reference(const Case& c) {
  std::vector<float> y = c.y0;
  const cpu::LoraSlotWeights w{c.a.data(), c.b_t.data(), c.ranks.data(), c.scalings.data(), c.in, c.out, c.max_rank};
  cpu::lora_add(c.x.data(), c.ldx, c.segments.data(), static_cast<int64_t>(c.segments.size()), w, y.data(), c.ldy);
  return y;
}

struct DeviceWeights {
  cuda::DeviceBuffer a, b_t, ranks, scalings;
  cuda::LoraSlotsDevice view(const Case& c) const {
    return {ptr<const float>(a), ptr<const float>(b_t), ptr<const int32_t>(ranks), ptr<const float>(scalings),
            c.num_slots, c.in, c.out, c.max_rank};
  }
};

DeviceWeights upload_weights(const Case& c) {
  return {cuda_test::to_device(c.a), cuda_test::to_device(c.b_t), cuda_test::to_device(c.ranks),
          cuda_test::to_device(c.scalings)};
}

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5 * std::abs(want[i]) + 1e-5) << what << " element " << i;
  }
}

TEST(CudaSgmvTest, MatchesCpuLoraAdd) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device on this machine";
  std::mt19937 rng(21);
  for (int round = 0; round < 10; ++round) {
    const Case c = random_case(rng);
    const std::vector<float> want = cpu_reference(c);
    std::vector<int32_t> slot, begin, end;
    for (const cpu::LoraSegment& s : c.segments) {
      slot.push_back(s.slot);
      begin.push_back(static_cast<int32_t>(s.token_begin));
      end.push_back(static_cast<int32_t>(s.token_begin + s.num_tokens));
    }
    const DeviceWeights dw = upload_weights(c);
    auto dslot = cuda_test::to_device(slot), dbegin = cuda_test::to_device(begin), dend = cuda_test::to_device(end);
    auto dx = cuda_test::to_device(c.x), dy = cuda_test::to_device(c.y0);
    auto dh = cuda::DeviceBuffer::allocate(c.tokens * c.max_rank * sizeof(float));
    ASSERT_TRUE(dh.is_ok());
    ASSERT_FALSE(HasFailure());
    const cuda::SgmvSegmentsDevice segs{ptr<const int32_t>(dslot), ptr<const int32_t>(dbegin),
                                        ptr<const int32_t>(dend), static_cast<int64_t>(slot.size())};
    Status s = cuda::sgmv_shrink(ptr<const float>(dx), c.ldx, c.tokens, segs, dw.view(c), ptr<float>(*dh),
                                 c.max_rank, nullptr);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    s = cuda::sgmv_expand(ptr<const float>(*dh), c.max_rank, c.tokens, segs, dw.view(c), ptr<float>(dy), c.ldy,
                          nullptr);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    expect_near_all(cuda_test::to_host<float>(dy, want.size()), want, "sgmv y");
  }
}

TEST(CudaSgmvTest, BgmvMatchesCpuLoraAddAndSkipsBadSlots) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device on this machine";
  std::mt19937 rng(22);
  for (int round = 0; round < 10; ++round) {
    Case c = random_case(rng);
    // Decode: one token per segment.
    std::vector<cpu::LoraSegment> one_each;
    std::vector<int32_t> token_slots(c.tokens);
    for (int64_t t = 0; t < c.tokens; ++t) {
      token_slots[t] = static_cast<int32_t>(std::uniform_int_distribution<int64_t>(-1, c.num_slots - 1)(rng));
      one_each.push_back({t, 1, token_slots[t]});
    }
    c.segments = one_each;
    const std::vector<float> want = cpu_reference(c);
    // Slots the CPU could not be given: the kernel must treat them as -1.
    std::vector<int32_t> device_slots = token_slots;
    for (int64_t t = 0; t < c.tokens; ++t) {
      if (token_slots[t] == -1 && t % 2 == 0) device_slots[t] = static_cast<int32_t>(c.num_slots + t);
    }
    const DeviceWeights dw = upload_weights(c);
    auto dslots = cuda_test::to_device(device_slots);
    auto dx = cuda_test::to_device(c.x), dy = cuda_test::to_device(c.y0);
    const int64_t ldh = c.max_rank + 3;
    auto dh = cuda::DeviceBuffer::allocate(c.tokens * ldh * sizeof(float));
    ASSERT_TRUE(dh.is_ok());
    ASSERT_FALSE(HasFailure());
    Status s = cuda::bgmv_shrink(ptr<const float>(dx), c.ldx, c.tokens, ptr<const int32_t>(dslots), dw.view(c),
                                 ptr<float>(*dh), ldh, nullptr);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    s = cuda::bgmv_expand(ptr<const float>(*dh), ldh, c.tokens, ptr<const int32_t>(dslots), dw.view(c),
                          ptr<float>(dy), c.ldy, nullptr);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    const std::vector<float> got = cuda_test::to_host<float>(dy, want.size());
    expect_near_all(got, want, "bgmv y");
    for (int64_t t = 0; t < c.tokens; ++t) {
      if (token_slots[t] != -1) continue;
      for (int64_t o = 0; o < c.ldy; ++o) ASSERT_EQ(got[t * c.ldy + o], c.y0[t * c.ldy + o]) << "token " << t;
    }
  }
}

TEST(CudaSgmvTest, RejectsBadArguments) {
  const float f = 0.0f;
  const int32_t i = 0;
  const cuda::LoraSlotsDevice good{&f, &f, &i, &f, 1, 8, 8, 4};
  const cuda::SgmvSegmentsDevice segs{&i, &i, &i, 1};
  float out = 0.0f;
  auto bad = [&](cuda::LoraSlotsDevice w) {
    return cuda::sgmv_shrink(&f, 8, 1, segs, w, &out, 4, nullptr).code() == StatusCode::kInvalidArgument &&
           cuda::sgmv_expand(&f, 4, 1, segs, w, &out, 8, nullptr).code() == StatusCode::kInvalidArgument &&
           cuda::bgmv_shrink(&f, 8, 1, &i, w, &out, 4, nullptr).code() == StatusCode::kInvalidArgument &&
           cuda::bgmv_expand(&f, 4, 1, &i, w, &out, 8, nullptr).code() == StatusCode::kInvalidArgument;
  };
  cuda::LoraSlotsDevice w = good;
  w.max_rank = 0;
  EXPECT_TRUE(bad(w));
  w.max_rank = 257;
  EXPECT_TRUE(bad(w));
  w = good;
  w.in = 0;
  EXPECT_TRUE(bad(w));
  w = good;
  w.out = -1;
  EXPECT_TRUE(bad(w));
  w = good;
  w.num_slots = -1;
  EXPECT_TRUE(bad(w));
  w = good;
  w.a = nullptr;
  EXPECT_TRUE(bad(w));
  // Leading dimensions below the row widths.
  EXPECT_EQ(cuda::sgmv_shrink(&f, 7, 1, segs, good, &out, 4, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::sgmv_shrink(&f, 8, 1, segs, good, &out, 3, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::sgmv_expand(&f, 4, 1, segs, good, &out, 7, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::bgmv_expand(&f, 3, 1, &i, good, &out, 8, nullptr).code(), StatusCode::kInvalidArgument);
  // Token and segment counts.
  EXPECT_EQ(cuda::sgmv_shrink(&f, 8, -1, segs, good, &out, 4, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::bgmv_shrink(&f, 8, 1, nullptr, good, &out, 4, nullptr).code(), StatusCode::kInvalidArgument);
  cuda::SgmvSegmentsDevice bad_segs = segs;
  bad_segs.count = -1;
  EXPECT_EQ(cuda::sgmv_expand(&f, 4, 1, bad_segs, good, &out, 8, nullptr).code(), StatusCode::kInvalidArgument);
  bad_segs = segs;
  bad_segs.token_end = nullptr;
  EXPECT_EQ(cuda::sgmv_shrink(&f, 8, 1, bad_segs, good, &out, 4, nullptr).code(), StatusCode::kInvalidArgument);
  // Nothing to do is not an error, and launches nothing.
  EXPECT_TRUE(cuda::sgmv_shrink(nullptr, 8, 0, segs, good, nullptr, 4, nullptr).is_ok());
  EXPECT_TRUE(cuda::bgmv_expand(nullptr, 4, 0, nullptr, good, nullptr, 8, nullptr).is_ok());
  bad_segs = segs;
  bad_segs.count = 0;
  EXPECT_TRUE(cuda::sgmv_expand(nullptr, 4, 1, bad_segs, good, nullptr, 8, nullptr).is_ok());
}

}  // namespace
}  // namespace loragate
