#include "kernels/cuda/bf16_convert.h"

#include <algorithm>
#include <string>

#include "kernels/cuda/check.cuh"

namespace loragate::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // the rest is grid-stride

// The integer form of the host's rounding, so device and host agree exactly.
__global__ void convert_f32_to_bf16_kernel(const float* __restrict__ x, uint16_t* __restrict__ y, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t bits = __float_as_uint(x[i]);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
      y[i] = static_cast<uint16_t>((bits >> 16) | 0x40);
    } else {
      bits += 0x7fffu + ((bits >> 16) & 1u);
      y[i] = static_cast<uint16_t>(bits >> 16);
    }
  }
}

}  // namespace

Status convert_f32_to_bf16(const float* x, uint16_t* y, int64_t n, void* stream) {
  if (n < 0) return Status::invalid_argument("convert_f32_to_bf16: n " + std::to_string(n));
  if (n == 0) return Status::ok();
  if (!x || !y) return Status::invalid_argument("convert_f32_to_bf16: null x or y");
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks);
  convert_f32_to_bf16_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, detail::as_stream(stream)>>>(x, y, n);
  return detail::launch_status("convert_f32_to_bf16 launch");
}

}  // namespace loragate::cuda
