#include "kernels/cuda/embedding.h"

#include <climits>
#include <string>

#include "kernels/cuda/check.cuh"

namespace loragate::cuda {
namespace {

constexpr int kThreads = 256;

// One block per token; bf16 -> f32 is exact (the bits are the f32's top half).
__global__ void embedding_bf16_kernel(const uint16_t* __restrict__ table, int64_t vocab, int64_t hidden,
                                      const int32_t* __restrict__ ids, float* __restrict__ out) {
  const int32_t id = ids[blockIdx.x];
  float* row_out = out + static_cast<int64_t>(blockIdx.x) * hidden;
  const bool valid = id >= 0 && id < vocab;
  const uint16_t* row = table + (valid ? id : 0) * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    row_out[i] = valid ? __uint_as_float(static_cast<uint32_t>(row[i]) << 16) : 0.0f;
  }
}

}  // namespace

Status embedding_bf16(const uint16_t* table, int64_t vocab, int64_t hidden, const int32_t* ids, int64_t tokens,
                      float* out, void* stream) {
  if (vocab <= 0 || hidden <= 0 || tokens < 0 || tokens > INT_MAX) {
    return Status::invalid_argument("embedding_bf16: vocab " + std::to_string(vocab) + ", hidden " +
                                    std::to_string(hidden) + ", tokens " + std::to_string(tokens));
  }
  if (tokens == 0) return Status::ok();
  if (!table || !ids || !out) return Status::invalid_argument("embedding_bf16: null table, ids or out");
  embedding_bf16_kernel<<<static_cast<unsigned>(tokens), kThreads, 0, detail::as_stream(stream)>>>(table, vocab, hidden,
                                                                                                    ids, out);
  return detail::launch_status("embedding_bf16 launch");
}

}  // namespace loragate::cuda
