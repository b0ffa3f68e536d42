// The cuBLASLt bf16 GEMM against a double-precision host product of the same
// bf16 values; skips cleanly without a GPU. Tolerance: the f32 worst-case
// summation bound, k · FLT_EPSILON · sum_k |x w| (bf16 products are exact in
// f32, so accumulation is the only error).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "tests/cuda/cuda_test_util.h"

namespace loragate {
namespace {

using cuda_test::ptr;

TEST(CudaGemmTest, MatchesHostProduct) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device on this machine";
  auto lt = cuda::CublasLt::create();
  ASSERT_TRUE(lt.is_ok()) << lt.status().to_string();
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // (m, n, k): decode rows, prefill rows, odd m; n and k multiples of 8 as
  // the model's projections are.
  const int64_t shapes[][3] = {{1, 256, 512}, {7, 96, 64}, {33, 512, 1024}, {128, 136, 520}, {5, 8, 4096}};
  for (const auto& shape : shapes) {
    const int64_t m = shape[0], n = shape[1], k = shape[2];
    std::vector<uint16_t> x(m * k), w(n * k);
    for (uint16_t& v : x) v = f32_to_bf16(dist(rng));
    for (uint16_t& v : w) v = f32_to_bf16(dist(rng));
    std::vector<float> y0(m * n);
    for (float& v : y0) v = dist(rng);
    auto dx = cuda_test::to_device(x), dw = cuda_test::to_device(w), dy = cuda_test::to_device(y0);
    ASSERT_FALSE(HasFailure());
    for (bool accumulate : {false, true}) {
      if (accumulate) {
        ASSERT_TRUE(dy.copy_from_host(y0.data(), y0.size() * sizeof(float)).is_ok());
      }
      const Status s = lt->gemm_bf16(ptr<const uint16_t>(dx), ptr<const uint16_t>(dw), ptr<float>(dy), m, n, k,
                                     accumulate, nullptr);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      const auto got = cuda_test::to_host<float>(dy, y0.size());
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double want = accumulate ? y0[i * n + j] : 0.0, magnitude = accumulate ? std::abs(y0[i * n + j]) : 0.0;
          for (int64_t p = 0; p < k; ++p) {
            const double term = double{bf16_to_f32(x[i * k + p])} * double{bf16_to_f32(w[j * k + p])};
            want += term;
            magnitude += std::abs(term);
          }
          ASSERT_NEAR(got[i * n + j], want, static_cast<double>(k + 1) * FLT_EPSILON * magnitude + 1e-6)
              << "m " << m << " n " << n << " k " << k << " accumulate " << accumulate << " at (" << i << ", " << j
              << ")";
        }
      }
    }
  }
}

TEST(CudaGemmTest, RejectsBadArgumentsAndEmptyHandles) {
  cuda::CublasLt empty;  // never touches the CUDA runtime
  const uint16_t h = 0;
  float y = 0.0f;
  EXPECT_EQ(empty.gemm_bf16(&h, &h, &y, -1, 8, 8, false, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.gemm_bf16(&h, &h, &y, 1, 0, 8, false, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.gemm_bf16(&h, &h, &y, 1, 8, 0, false, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.gemm_bf16(nullptr, &h, &y, 1, 8, 8, false, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.gemm_bf16(&h, &h, &y, 1, 8, 8, false, nullptr).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(empty.gemm_bf16(nullptr, nullptr, nullptr, 0, 8, 8, false, nullptr).is_ok());  // m = 0: no work
  cuda::CublasLt moved(std::move(empty));
  EXPECT_EQ(moved.gemm_bf16(&h, &h, &y, 1, 8, 8, false, nullptr).code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace loragate
