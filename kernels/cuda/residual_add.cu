#include "kernels/cuda/residual_add.h"

#include <algorithm>
#include <string>

#include "kernels/cuda/check.cuh"

namespace loragate::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // the rest is grid-stride

__global__ void add_inplace_kernel(float* __restrict__ y, const float* __restrict__ x, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = __fadd_rn(y[i], x[i]);
  }
}

}  // namespace

Status add_inplace(float* y, const float* x, int64_t n, void* stream) {
  if (n < 0) return Status::invalid_argument("add_inplace: n " + std::to_string(n));
  if (n == 0) return Status::ok();
  if (!y || !x) return Status::invalid_argument("add_inplace: null y or x");
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks);
  add_inplace_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, detail::as_stream(stream)>>>(y, x, n);
  return detail::launch_status("add_inplace launch");
}

}  // namespace loragate::cuda
