#include "kernels/cuda/bias_add.h"

#include <algorithm>
#include <string>

#include "kernels/cuda/check.cuh"

namespace loragate::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // the rest is grid-stride

__global__ void add_bias_kernel(float* __restrict__ x, const float* __restrict__ b, int64_t tokens, int64_t dim,
                                int64_t row_stride) {
  const int64_t n = tokens * dim;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = k / dim, i = k % dim;
    x[t * row_stride + i] = __fadd_rn(x[t * row_stride + i], b[i]);
  }
}

}  // namespace

Status add_bias(float* x, const float* b, int64_t tokens, int64_t dim, int64_t row_stride, void* stream) {
  if (tokens < 0 || dim <= 0 || row_stride < dim) {
    return Status::invalid_argument("add_bias: tokens " + std::to_string(tokens) + ", dim " + std::to_string(dim) +
                                    ", row_stride " + std::to_string(row_stride));
  }
  if (tokens == 0) return Status::ok();
  if (!x || !b) return Status::invalid_argument("add_bias: null x or b");
  const int64_t blocks = std::min<int64_t>((tokens * dim + kThreads - 1) / kThreads, kMaxBlocks);
  add_bias_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, detail::as_stream(stream)>>>(x, b, tokens, dim,
                                                                                              row_stride);
  return detail::launch_status("add_bias launch");
}

}  // namespace loragate::cuda
