#include "kernels/cuda/rmsnorm.h"

#include <cuda_runtime.h>

#include <string>

namespace loragate::cuda {
namespace {

constexpr int kThreads = 256;

// One block per token: a block-wide sum of squares, then the scaled write.
__global__ void rmsnorm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                               float* __restrict__ y, int64_t dim, float eps) {
  const float* row = x + blockIdx.x * dim;
  float* out = y + blockIdx.x * dim;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += row[i] * row[i];

  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  __shared__ float warp_sums[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (warp == 0) {
    sum = lane < kThreads / 32 ? warp_sums[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) warp_sums[0] = sum;
  }
  __syncthreads();
  const float inv = rsqrtf(warp_sums[0] / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) out[i] = row[i] * inv * w[i];
}

}  // namespace

Status rmsnorm(const float* x, const float* weight, float* y, int64_t tokens, int64_t dim, float eps,
               void* stream) {
  if (tokens < 0 || dim <= 0) {
    return Status::invalid_argument("rmsnorm: tokens " + std::to_string(tokens) + ", dim " + std::to_string(dim));
  }
  if (tokens == 0) return Status::ok();
  rmsnorm_kernel<<<static_cast<unsigned>(tokens), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, weight, y, dim, eps);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return Status::internal(std::string("rmsnorm launch: ") + cudaGetErrorString(err));
  return Status::ok();
}

}  // namespace loragate::cuda
