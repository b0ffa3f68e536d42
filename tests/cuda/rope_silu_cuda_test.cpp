// The CUDA RoPE and SiLU-mul against the CPU reference on random shapes;
// skips cleanly without a GPU. RoPE rounds every product and sum as the CPU
// does, so it must agree to 1e-6 relative (in practice bit for bit); SiLU uses
// the device expf instead of the CPU's exp, so 1e-5 relative.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/silu_mul.h"
#include "tests/cuda/cuda_test_util.h"

namespace loragate {
namespace {

using cuda_test::ptr;

TEST(CudaRopeTest, MatchesCpu) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device on this machine";
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f), angle(-3.2f, 3.2f);
  for (int round = 0; round < 8; ++round) {
    const int64_t tokens = std::uniform_int_distribution<int64_t>(1, 40)(rng);
    const int64_t heads = std::uniform_int_distribution<int64_t>(1, 12)(rng);
    const int64_t head_dim = 2 * std::uniform_int_distribution<int64_t>(1, 80)(rng);
    const int64_t row_stride = heads * head_dim + std::uniform_int_distribution<int64_t>(0, 33)(rng);
    std::vector<float> x(tokens * row_stride), cos(tokens * head_dim / 2), sin(cos.size());
    for (float& v : x) v = dist(rng);
    for (size_t i = 0; i < cos.size(); ++i) {
      const float a = angle(rng);
      cos[i] = std::cos(a);
      sin[i] = std::sin(a);
    }
    auto dx = cuda_test::to_device(x);
    auto dc = cuda_test::to_device(cos);
    auto ds = cuda_test::to_device(sin);
    ASSERT_FALSE(HasFailure());
    std::vector<float> want = x;
    cpu::rope_rotate_half(want.data(), tokens, heads, head_dim, row_stride, cos.data(), sin.data());
    const Status s = cuda::rope_rotate_half(ptr<float>(dx), tokens, heads, head_dim, row_stride,
                                            ptr<const float>(dc), ptr<const float>(ds), nullptr);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    const auto got = cuda_test::to_host<float>(dx, x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      // Includes the padding past heads * head_dim, which must stay as it was.
      ASSERT_NEAR(got[i], want[i], 1e-6 * std::abs(want[i]) + 1e-30) << "element " << i;
    }
  }
}

TEST(CudaRopeTest, RejectsBadShapes) {
  float dummy = 0.0f;
  EXPECT_EQ(cuda::rope_rotate_half(&dummy, 1, 2, 7, 14, &dummy, &dummy, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::rope_rotate_half(&dummy, 1, 2, 8, 15, &dummy, &dummy, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::rope_rotate_half(&dummy, -1, 2, 8, 16, &dummy, &dummy, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::rope_rotate_half(&dummy, 1, 0, 8, 16, &dummy, &dummy, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::rope_rotate_half(nullptr, 1, 2, 8, 16, nullptr, nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(cuda::rope_rotate_half(nullptr, 0, 2, 8, 16, nullptr, nullptr, nullptr).is_ok());
}

TEST(CudaSiluMulTest, MatchesCpuIncludingEdgeCases) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device on this machine";
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-12.0f, 12.0f);
  for (int round = 0; round < 6; ++round) {
    const int64_t tokens = std::uniform_int_distribution<int64_t>(1, 30)(rng);
    const int64_t inter = std::uniform_int_distribution<int64_t>(1, 3000)(rng);
    std::vector<float> gate_up(tokens * 2 * inter);
    for (float& v : gate_up) v = dist(rng);
    const float specials[] = {kInf, -kInf, -100.0f, -88.5f, 0.0f, -0.0f, 88.0f, 1e-30f};
    for (size_t i = 0; i < std::size(specials) && static_cast<int64_t>(i) < inter; ++i) gate_up[i] = specials[i];
    std::vector<float> want(tokens * inter);
    cpu::silu_mul(gate_up.data(), want.data(), tokens, inter);
    auto dg = cuda_test::to_device(gate_up);
    auto dout = cuda::DeviceBuffer::allocate(want.size() * sizeof(float));
    ASSERT_TRUE(dout.is_ok());
    ASSERT_FALSE(HasFailure());
    const Status s = cuda::silu_mul(ptr<const float>(dg), ptr<float>(*dout), tokens, inter, nullptr);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    const auto got = cuda_test::to_host<float>(*dout, want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::isnan(want[i]) || std::isinf(want[i])) {
        ASSERT_TRUE(std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i]) << i << ": " << got[i];
      } else {
        ASSERT_NEAR(got[i], want[i], 1e-5 * std::abs(want[i]) + 1e-30) << "element " << i;
      }
    }
  }
}

TEST(CudaSiluMulTest, RejectsBadShapes) {
  EXPECT_EQ(cuda::silu_mul(nullptr, nullptr, -1, 8, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::silu_mul(nullptr, nullptr, 1, 0, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::silu_mul(nullptr, nullptr, 1, 8, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(cuda::silu_mul(nullptr, nullptr, 0, 8, nullptr).is_ok());
}

}  // namespace
}  // namespace loragate
