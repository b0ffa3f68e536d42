// The CUDA RMSNorm against the CPU reference; skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <random>

#include "kernels/cpu/ops.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/rmsnorm.h"

namespace loragate {
namespace {

TEST(CudaRmsNormTest, MatchesCpu) {
  if (cuda::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (int64_t dim : {64, 768, 1000, 4096}) {
    const int64_t tokens = 7;
    std::vector<float> x(tokens * dim), w(dim), y_cpu(x.size()), y_gpu(x.size());
    for (float& v : x) v = dist(rng);
    for (float& v : w) v = dist(rng);
    cpu::rmsnorm(x.data(), w.data(), y_cpu.data(), tokens, dim, 1e-5f);

    auto dx = cuda::DeviceBuffer::allocate(x.size() * 4);
    auto dw = cuda::DeviceBuffer::allocate(w.size() * 4);
    auto dy = cuda::DeviceBuffer::allocate(x.size() * 4);
    ASSERT_TRUE(dx.is_ok() && dw.is_ok() && dy.is_ok());
    ASSERT_TRUE(dx->copy_from_host(x.data(), x.size() * 4).is_ok());
    ASSERT_TRUE(dw->copy_from_host(w.data(), w.size() * 4).is_ok());
    Status s = cuda::rmsnorm(static_cast<const float*>(dx->get()), static_cast<const float*>(dw->get()),
                             static_cast<float*>(dy->get()), tokens, dim, 1e-5f, nullptr);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    ASSERT_TRUE(dy->copy_to_host(y_gpu.data(), y_gpu.size() * 4).is_ok());
    for (size_t i = 0; i < y_cpu.size(); ++i) ASSERT_NEAR(y_gpu[i], y_cpu[i], 1e-4 * (1 + std::abs(y_cpu[i]))) << i;
  }
}

TEST(CudaRmsNormTest, RejectsBadShapes) {
  Status s = cuda::rmsnorm(nullptr, nullptr, nullptr, 1, 0, 1e-5f, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loragate
