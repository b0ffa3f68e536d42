#include "kernels/cuda/rope.h"

#include <climits>
#include <string>

#include "kernels/cuda/check.cuh"

namespace loragate::cuda {
namespace {

constexpr int kThreads = 256;

// One block per token, one thread per (head, pair). The _rn intrinsics stop
// nvcc fusing the products into FMAs, so each value rounds as on the CPU.
__global__ void rope_rotate_half_kernel(float* x, int64_t heads, int64_t half, int64_t row_stride,
                                        const float* __restrict__ cos, const float* __restrict__ sin) {
  const int64_t t = blockIdx.x;
  const float* ct = cos + t * half;
  const float* st = sin + t * half;
  for (int64_t i = threadIdx.x; i < heads * half; i += blockDim.x) {
    const int64_t h = i / half, j = i % half;
    float* v = x + t * row_stride + h * 2 * half;
    const float a = v[j], b = v[j + half], c = ct[j], s = st[j];
    v[j] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
    v[j + half] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
  }
}

}  // namespace

Status rope_rotate_half(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t row_stride,
                        const float* cos, const float* sin, void* stream) {
  if (tokens < 0 || tokens > INT_MAX || heads <= 0 || head_dim <= 0 || head_dim % 2 != 0 ||
      row_stride < heads * head_dim) {
    return Status::invalid_argument("rope_rotate_half: tokens " + std::to_string(tokens) + ", heads " +
                                    std::to_string(heads) + ", head_dim " + std::to_string(head_dim) +
                                    " (must be even), row_stride " + std::to_string(row_stride) +
                                    " (must be at least heads * head_dim)");
  }
  if (tokens == 0) return Status::ok();
  if (!x || !cos || !sin) return Status::invalid_argument("rope_rotate_half: null x, cos or sin");
  rope_rotate_half_kernel<<<static_cast<unsigned>(tokens), kThreads, 0, detail::as_stream(stream)>>>(
      x, heads, head_dim / 2, row_stride, cos, sin);
  return detail::launch_status("rope_rotate_half launch");
}

}  // namespace loragate::cuda
