#include "kernels/cuda/paged_attention_varlen.h"

#include <climits>
#include <cmath>
#include <string>

#include "kernels/cuda/check.cuh"

namespace loragate::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxHeadDim = 256;
constexpr int kPerLane = kMaxHeadDim / 32;  // head_dim elements each lane holds
constexpr int64_t kMaxGridY = 65535;

struct VarlenArgs {
  const float* q;
  int64_t ldq;
  float* out;
  int64_t ldo;
  PagedKvDevice kv;
  const int32_t* block_tables;
  int64_t max_blocks_per_seq;
  const int32_t* token_seqs;
  const int32_t* positions;
  int64_t sliding_window;
  int64_t group;  // query heads per KV head
  float scale;
};

// grid: (token, query head). The decode kernel's scheme: each warp runs an
// online softmax over every kWarps-th position of [first, pos] (lane l holds
// elements l, l + 32, ... of the head), then the warps' partial results are
// merged through shared memory.
__global__ void paged_attention_varlen_kernel(VarlenArgs args) {
  const int64_t token = blockIdx.x, head = blockIdx.y;
  const PagedKvDevice& kv = args.kv;
  const int64_t d = kv.head_dim;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* out = args.out + token * args.ldo + head * d;

  const int64_t pos = min(static_cast<int64_t>(args.positions[token]), args.max_blocks_per_seq * kv.block_size - 1);
  if (pos < 0) {
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) out[i] = 0.0f;
    return;
  }
  const int64_t first = args.sliding_window > 0 ? max(int64_t{0}, pos - args.sliding_window + 1) : 0;
  const int32_t* table = args.block_tables + static_cast<int64_t>(args.token_seqs[token]) * args.max_blocks_per_seq;
  const int64_t kvh = head / args.group;

  float qv[kPerLane], acc[kPerLane];
  const float* q = args.q + token * args.ldq + head * d;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t e = lane + 32 * j;
    qv[j] = e < d ? q[e] : 0.0f;
    acc[j] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int64_t p = first + warp; p <= pos; p += kWarps) {
    const int32_t block = table[p / kv.block_size];
    if (block < 0 || block >= kv.num_blocks) continue;
    const int64_t row = ((block * kv.block_size + p % kv.block_size) * kv.num_kv_heads + kvh) * d;
    const float* k = kv.k + row;
    const float* v = kv.v + row;
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t e = lane + 32 * j;
      if (e < d) s = fmaf(qv[j], k[e], s);
    }
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
    s *= args.scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 on the first position (m = -inf)
    const float weight = expf(s - m_new);
    l = l * correction + weight;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t e = lane + 32 * j;
      acc[j] = e < d ? fmaf(weight, v[e], acc[j] * correction) : 0.0f;
    }
    m = m_new;
  }

  __shared__ float warp_m[kWarps], warp_l[kWarps];
  __shared__ float warp_acc[kWarps][kMaxHeadDim];
  if (lane == 0) {
    warp_m[warp] = m;
    warp_l[warp] = l;
  }
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    if (lane + 32 * j < d) warp_acc[warp][lane + 32 * j] = acc[j];
  }
  __syncthreads();
  float m_all = -INFINITY;
  for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, warp_m[w]);
  float l_all = 0.0f;
  float factor[kWarps];
  for (int w = 0; w < kWarps; ++w) {
    // A warp that saw no position has m = -inf and l = 0: its factor is 0.
    factor[w] = warp_m[w] == -INFINITY ? 0.0f : expf(warp_m[w] - m_all);
    l_all += warp_l[w] * factor[w];
  }
  const float inv = l_all > 0.0f ? 1.0f / l_all : 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w) o = fmaf(warp_acc[w][i], factor[w], o);
    out[i] = o * inv;
  }
}

}  // namespace

Status paged_attention_varlen(const float* q, int64_t ldq, float* out, int64_t ldo, int64_t tokens, int64_t num_heads,
                              const PagedKvDevice& kv, const int32_t* block_tables, int64_t max_blocks_per_seq,
                              const int32_t* token_seqs, const int32_t* positions, int64_t sliding_window,
                              void* stream) {
  if (tokens < 0 || tokens > INT_MAX || num_heads <= 0 || num_heads > kMaxGridY) {
    return Status::invalid_argument("paged_attention_varlen: tokens " + std::to_string(tokens) + ", num_heads " +
                                    std::to_string(num_heads) + " (at most " + std::to_string(kMaxGridY) + ")");
  }
  if (kv.head_dim <= 0 || kv.head_dim > kMaxHeadDim || kv.num_kv_heads <= 0 || num_heads % kv.num_kv_heads != 0) {
    return Status::invalid_argument("paged_attention_varlen: head_dim " + std::to_string(kv.head_dim) + " (1.." +
                                    std::to_string(kMaxHeadDim) + "), num_kv_heads " + std::to_string(kv.num_kv_heads) +
                                    " (must divide num_heads " + std::to_string(num_heads) + ")");
  }
  if (ldq < num_heads * kv.head_dim || ldo < num_heads * kv.head_dim) {
    return Status::invalid_argument("paged_attention_varlen: ldq " + std::to_string(ldq) + ", ldo " +
                                    std::to_string(ldo) + " below a row of " +
                                    std::to_string(num_heads * kv.head_dim));
  }
  if (kv.block_size <= 0 || kv.num_blocks <= 0 || max_blocks_per_seq <= 0 || sliding_window < 0) {
    return Status::invalid_argument("paged_attention_varlen: block_size " + std::to_string(kv.block_size) +
                                    ", num_blocks " + std::to_string(kv.num_blocks) + ", max_blocks_per_seq " +
                                    std::to_string(max_blocks_per_seq) + ", sliding_window " +
                                    std::to_string(sliding_window));
  }
  if (tokens == 0) return Status::ok();
  if (!q || !out || !kv.k || !kv.v || !block_tables || !token_seqs || !positions) {
    return Status::invalid_argument("paged_attention_varlen: null q, out, cache or index array");
  }
  const VarlenArgs args{q,
                        ldq,
                        out,
                        ldo,
                        kv,
                        block_tables,
                        max_blocks_per_seq,
                        token_seqs,
                        positions,
                        sliding_window,
                        num_heads / kv.num_kv_heads,
                        1.0f / std::sqrt(static_cast<float>(kv.head_dim))};
  const dim3 grid(static_cast<unsigned>(tokens), static_cast<unsigned>(num_heads));
  paged_attention_varlen_kernel<<<grid, kThreads, 0, detail::as_stream(stream)>>>(args);
  return detail::launch_status("paged_attention_varlen launch");
}

}  // namespace loragate::cuda
