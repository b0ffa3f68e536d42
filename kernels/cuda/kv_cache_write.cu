#include "kernels/cuda/kv_cache_write.h"

#include <climits>
#include <string>

#include "kernels/cuda/check.cuh"

namespace loragate::cuda {
namespace {

constexpr int kThreads = 128;

struct WriteArgs {
  const float* k;
  const float* v;
  int64_t ld, width;
  const int32_t* token_seqs;
  const int32_t* positions;
  const int32_t* block_tables;
  int64_t max_blocks_per_seq, block_size, num_blocks;
  float* k_cache;
  float* v_cache;
};

// grid: one block per token, its threads across the row.
__global__ void kv_cache_write_kernel(WriteArgs a) {
  const int64_t t = blockIdx.x;
  const int64_t pos = a.positions[t];
  if (pos < 0 || pos >= a.max_blocks_per_seq * a.block_size) return;
  const int64_t block = a.block_tables[a.token_seqs[t] * a.max_blocks_per_seq + pos / a.block_size];
  if (block < 0 || block >= a.num_blocks) return;
  const int64_t row = (block * a.block_size + pos % a.block_size) * a.width;
  for (int64_t i = threadIdx.x; i < a.width; i += blockDim.x) {
    a.k_cache[row + i] = a.k[t * a.ld + i];
    a.v_cache[row + i] = a.v[t * a.ld + i];
  }
}

}  // namespace

Status kv_cache_write(const float* k, const float* v, int64_t ld, int64_t tokens, int64_t width,
                      const int32_t* token_seqs, const int32_t* positions, const int32_t* block_tables,
                      int64_t max_blocks_per_seq, int64_t block_size, int64_t num_blocks, float* k_cache,
                      float* v_cache, void* stream) {
  if (tokens < 0 || tokens > INT_MAX || width <= 0 || ld < width || max_blocks_per_seq <= 0 || block_size <= 0 ||
      num_blocks <= 0) {
    return Status::invalid_argument("kv_cache_write: tokens " + std::to_string(tokens) + ", width " +
                                    std::to_string(width) + ", ld " + std::to_string(ld) + ", max_blocks_per_seq " +
                                    std::to_string(max_blocks_per_seq) + ", block_size " +
                                    std::to_string(block_size) + ", num_blocks " + std::to_string(num_blocks));
  }
  if (tokens == 0) return Status::ok();
  if (!k || !v || !token_seqs || !positions || !block_tables || !k_cache || !v_cache) {
    return Status::invalid_argument("kv_cache_write: null k, v, index array or cache");
  }
  const WriteArgs args{k,          v,         ld, width, token_seqs, positions, block_tables, max_blocks_per_seq,
                       block_size, num_blocks, k_cache, v_cache};
  kv_cache_write_kernel<<<static_cast<unsigned>(tokens), kThreads, 0, detail::as_stream(stream)>>>(args);
  return detail::launch_status("kv_cache_write launch");
}

}  // namespace loragate::cuda
