#include "kernels/cuda/gather_rows.h"

#include <algorithm>
#include <string>

#include "kernels/cuda/check.cuh"

namespace loragate::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // the rest is grid-stride

__global__ void gather_rows_kernel(const float* __restrict__ src, int64_t ld_src, int64_t src_rows,
                                   const int32_t* __restrict__ rows, int64_t n, int64_t width,
                                   float* __restrict__ dst) {
  const int64_t total = n * width;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = k / width, c = k % width;
    const int64_t r = rows[i];
    dst[k] = r >= 0 && r < src_rows ? src[r * ld_src + c] : 0.0f;
  }
}

}  // namespace

Status gather_rows(const float* src, int64_t ld_src, int64_t src_rows, const int32_t* rows, int64_t n, int64_t width,
                   float* dst, void* stream) {
  if (n < 0 || width <= 0 || ld_src < width || src_rows < 0) {
    return Status::invalid_argument("gather_rows: n " + std::to_string(n) + ", width " + std::to_string(width) +
                                    ", ld_src " + std::to_string(ld_src) + ", src_rows " + std::to_string(src_rows));
  }
  if (n == 0) return Status::ok();
  if (!src || !rows || !dst) return Status::invalid_argument("gather_rows: null src, rows or dst");
  const int64_t blocks = std::min<int64_t>((n * width + kThreads - 1) / kThreads, kMaxBlocks);
  gather_rows_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, detail::as_stream(stream)>>>(
      src, ld_src, src_rows, rows, n, width, dst);
  return detail::launch_status("gather_rows launch");
}

}  // namespace loragate::cuda
