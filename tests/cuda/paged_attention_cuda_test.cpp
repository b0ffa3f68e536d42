// The CUDA paged attention, on decode steps, against cpu::paged_attention_one on random
// shapes (GQA groups, head dims up to 256, sliding windows, shuffled block
// tables); skips cleanly without a GPU. The GPU sums in another order and
// uses expf, so 1e-5 relative plus 1e-5 absolute (outputs are O(1)).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/paged_attention.h"
#include "kernels/cuda/paged_attention_varlen.h"
#include "tests/cuda/cuda_test_util.h"

namespace loragate {
namespace {

using cuda_test::ptr;

TEST(CudaPagedAttentionTest, MatchesCpu) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device on this machine";
  std::mt19937 rng(31);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t head_dims[] = {32, 64, 80, 128, 256, 17};
  for (int round = 0; round < 12; ++round) {
    const int64_t d = head_dims[round % std::size(head_dims)];
    const int64_t num_kv_heads = int64_t{1} << uniform(0, 2);
    const int64_t num_heads = num_kv_heads * (int64_t{1} << uniform(0, 2));
    const int64_t block_size = round % 2 ? 16 : 8;
    const int64_t num_seqs = uniform(1, 6);
    const int64_t window = round % 3 == 0 ? 0 : uniform(1, 70);
    std::vector<int32_t> lens(num_seqs);
    for (int32_t& l : lens) l = static_cast<int32_t>(uniform(1, 300));
    lens[0] = 1;
    if (num_seqs > 1) lens[1] = 0;  // nothing cached yet: zeros
    const int64_t max_blocks = (300 + block_size - 1) / block_size;
    const int64_t num_blocks = num_seqs * max_blocks + 3;
    // Every sequence gets its own blocks, in shuffled order across the pool.
    std::vector<int32_t> pool(num_blocks);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    std::vector<int32_t> tables(num_seqs * max_blocks);
    std::copy(pool.begin(), pool.begin() + static_cast<int64_t>(tables.size()), tables.begin());

    std::vector<float> k(num_blocks * block_size * num_kv_heads * d), v(k.size()), q(num_seqs * num_heads * d);
    for (float& x : k) x = dist(rng);
    for (float& x : v) x = dist(rng);
    for (float& x : q) x = 3.0f * dist(rng);  // sharper softmax than uniform weights

    std::vector<float> want(q.size(), 0.0f), scratch(300);
    const cpu::PagedKv cpu_kv{k.data(), v.data(), block_size, num_kv_heads, d};
    for (int64_t s = 0; s < num_seqs; ++s) {
      if (lens[s] == 0) continue;
      const int64_t first = window > 0 ? std::max<int64_t>(0, lens[s] - window) : 0;
      cpu::paged_attention_one(q.data() + s * num_heads * d, want.data() + s * num_heads * d, num_heads, cpu_kv,
                               tables.data() + s * max_blocks, first, lens[s] - 1, scratch.data());
    }

    auto dq = cuda_test::to_device(q), dk = cuda_test::to_device(k), dv = cuda_test::to_device(v);
    // A decode step: sequence s's one token sits at position len - 1 (-1: nothing cached, zeros).
    std::vector<int32_t> seqs(num_seqs), positions(num_seqs);
    for (int64_t s = 0; s < num_seqs; ++s) {
      seqs[s] = static_cast<int32_t>(s);
      positions[s] = lens[s] - 1;
    }
    auto dtables = cuda_test::to_device(tables), dseqs = cuda_test::to_device(seqs),
         dpositions = cuda_test::to_device(positions);
    auto dout = cuda::DeviceBuffer::allocate(q.size() * sizeof(float));
    ASSERT_TRUE(dout.is_ok());
    ASSERT_FALSE(HasFailure());
    const cuda::PagedKvDevice kv{ptr<const float>(dk), ptr<const float>(dv), num_blocks, block_size, num_kv_heads, d};
    const int64_t row = num_heads * d;
    const Status st = cuda::paged_attention_varlen(ptr<const float>(dq), row, ptr<float>(*dout), row, num_seqs,
                                                   num_heads, kv, ptr<const int32_t>(dtables), max_blocks,
                                                   ptr<const int32_t>(dseqs), ptr<const int32_t>(dpositions), window,
                                                   nullptr);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    const auto got = cuda_test::to_host<float>(*dout, q.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-5 * std::abs(want[i]) + 1e-5)
          << "round " << round << " element " << i << " (head_dim " << d << ", window " << window << ")";
    }
  }
}

TEST(CudaPagedAttentionTest, RejectsBadShapes) {
  const float f = 0.0f;
  const int32_t i = 1;
  float out = 0.0f;
  const cuda::PagedKvDevice good{&f, &f, 1, 16, 2, 64};
  auto code = [&](int64_t seqs, int64_t heads, cuda::PagedKvDevice kv, int64_t max_blocks, int64_t window) {
    const int64_t row = heads * kv.head_dim;
    return cuda::paged_attention_varlen(&f, row, &out, row, seqs, heads, kv, &i, max_blocks, &i, &i, window, nullptr)
        .code();
  };
  cuda::PagedKvDevice kv = good;
  kv.head_dim = 0;
  EXPECT_EQ(code(1, 4, kv, 1, 0), StatusCode::kInvalidArgument);
  kv.head_dim = 257;
  EXPECT_EQ(code(1, 4, kv, 1, 0), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(1, 3, good, 1, 0), StatusCode::kInvalidArgument);  // 2 KV heads do not divide 3
  kv = good;
  kv.num_kv_heads = 0;
  EXPECT_EQ(code(1, 4, kv, 1, 0), StatusCode::kInvalidArgument);
  kv = good;
  kv.block_size = 0;
  EXPECT_EQ(code(1, 4, kv, 1, 0), StatusCode::kInvalidArgument);
  kv = good;
  kv.num_blocks = 0;
  EXPECT_EQ(code(1, 4, kv, 1, 0), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(1, 4, good, 0, 0), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(1, 4, good, 1, -1), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(-1, 4, good, 1, 0), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(1, 0, good, 1, 0), StatusCode::kInvalidArgument);
  kv = good;
  kv.v = nullptr;
  EXPECT_EQ(code(1, 4, kv, 1, 0), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(0, 4, good, 1, 0), StatusCode::kOk);  // no tokens: nothing launched
}

}  // namespace
}  // namespace loragate
