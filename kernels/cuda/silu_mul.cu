#include "kernels/cuda/silu_mul.h"

#include <algorithm>
#include <string>

#include "kernels/cuda/check.cuh"

namespace loragate::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // enough to fill an H200; the rest is grid-stride

// g / (1 + e^-g) with IEEE division, as the CPU computes it; expf (within
// 2 ulp) stands in for the CPU's own exp, so results agree to a few ulp.
__global__ void silu_mul_kernel(const float* __restrict__ gate_up, float* __restrict__ out, int64_t tokens,
                                int64_t inter) {
  const int64_t n = tokens * inter;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = k / inter, i = k % inter;
    const float gv = gate_up[t * 2 * inter + i];
    const float uv = gate_up[t * 2 * inter + inter + i];
    out[k] = __fmul_rn(__fdiv_rn(gv, __fadd_rn(1.0f, expf(-gv))), uv);
  }
}

}  // namespace

Status silu_mul(const float* gate_up, float* out, int64_t tokens, int64_t inter, void* stream) {
  if (tokens < 0 || inter <= 0) {
    return Status::invalid_argument("silu_mul: tokens " + std::to_string(tokens) + ", inter " + std::to_string(inter));
  }
  if (tokens == 0) return Status::ok();
  if (!gate_up || !out) return Status::invalid_argument("silu_mul: null gate_up or out");
  const int64_t blocks = std::min<int64_t>((tokens * inter + kThreads - 1) / kThreads, kMaxBlocks);
  silu_mul_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, detail::as_stream(stream)>>>(gate_up, out, tokens,
                                                                                              inter);
  return detail::launch_status("silu_mul launch");
}

}  // namespace loragate::cuda
