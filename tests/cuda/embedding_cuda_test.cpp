// The CUDA bf16 embedding gather against bf16_to_f32 on the host (exact:
// bf16 -> f32 loses nothing); skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "common/dtype.h"
#include "kernels/cuda/embedding.h"
#include "tests/cuda/cuda_test_util.h"

namespace loragate {
namespace {

using cuda_test::ptr;

TEST(CudaEmbeddingTest, MatchesHostGatherExactly) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device on this machine";
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  for (int round = 0; round < 6; ++round) {
    const int64_t vocab = std::uniform_int_distribution<int64_t>(1, 5000)(rng);
    const int64_t hidden = std::uniform_int_distribution<int64_t>(1, 1100)(rng);
    const int64_t tokens = std::uniform_int_distribution<int64_t>(1, 70)(rng);
    std::vector<uint16_t> table(vocab * hidden);
    for (uint16_t& v : table) v = f32_to_bf16(dist(rng));
    std::vector<int32_t> ids(tokens);
    for (int32_t& id : ids) id = std::uniform_int_distribution<int32_t>(0, static_cast<int32_t>(vocab) - 1)(rng);
    ids[0] = static_cast<int32_t>(vocab - 1);
    if (tokens > 2) ids[1] = -1;                               // out of range: zeros, no read
    if (tokens > 3) ids[2] = static_cast<int32_t>(vocab);      // out of range: zeros, no read

    auto dt = cuda_test::to_device(table);
    auto di = cuda_test::to_device(ids);
    auto dout = cuda::DeviceBuffer::allocate(tokens * hidden * sizeof(float));
    ASSERT_TRUE(dout.is_ok());
    ASSERT_FALSE(HasFailure());
    const Status s = cuda::embedding_bf16(ptr<const uint16_t>(dt), vocab, hidden, ptr<const int32_t>(di), tokens,
                                          ptr<float>(*dout), nullptr);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    const auto out = cuda_test::to_host<float>(*dout, tokens * hidden);
    for (int64_t t = 0; t < tokens; ++t) {
      const bool valid = ids[t] >= 0 && ids[t] < vocab;
      for (int64_t i = 0; i < hidden; ++i) {
        const float want = valid ? bf16_to_f32(table[ids[t] * hidden + i]) : 0.0f;
        ASSERT_EQ(out[t * hidden + i], want) << "token " << t << " id " << ids[t] << " element " << i;
      }
    }
  }
}

TEST(CudaEmbeddingTest, RejectsBadShapes) {
  EXPECT_EQ(cuda::embedding_bf16(nullptr, 0, 8, nullptr, 1, nullptr, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::embedding_bf16(nullptr, 8, 0, nullptr, 1, nullptr, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::embedding_bf16(nullptr, 8, 8, nullptr, -1, nullptr, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::embedding_bf16(nullptr, 8, 8, nullptr, 3, nullptr, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(cuda::embedding_bf16(nullptr, 8, 8, nullptr, 0, nullptr, nullptr).is_ok());  // nothing to do
}

}  // namespace
}  // namespace loragate
