#include "kernels/cuda/sgmv.h"

#include <algorithm>
#include <climits>
#include <string>

#include "kernels/cuda/check.cuh"

namespace loragate::cuda {
namespace {

constexpr int kThreads = 256;         // 8 warps
constexpr int kMaxRank = 256;         // bounds the expand step's shared memory
constexpr int kExpandTokens = 8;      // tokens sharing each B load in the expand step
constexpr int64_t kMaxGridYZ = 65535;

// The usable rank of `slot`: 0 for no adapter or a slot out of range, so a bad
// slot id reads nothing.
__device__ int slot_rank(const LoraSlotsDevice& w, int32_t slot) {
  if (slot < 0 || slot >= w.num_slots) return 0;
  return min(max(w.ranks[slot], 0), static_cast<int>(w.max_rank));
}

// One token's h row, by the whole block: a warp per rank row of A.
__device__ void shrink_token(const float* __restrict__ xt, const float* __restrict__ a, int rank, int64_t in,
                             float* __restrict__ ht) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = warp; r < rank; r += blockDim.x / 32) {
    const float* ar = a + r * in;
    float sum = 0.0f;
    for (int64_t k = lane; k < in; k += 32) sum = fmaf(xt[k], ar[k], sum);
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) ht[r] = sum;
  }
}

// y rows [t0, t0 + n) (n <= kExpandTokens), columns of this block's tile:
// y[o] = fma(scaling * h[r], B_t[r][o], y[o]) over r in order, as the CPU does.
__device__ void expand_tokens(const float* __restrict__ h, int64_t ldh, float* __restrict__ y, int64_t ldy, int64_t t0,
                              int n, const float* __restrict__ b_t, int rank, float scaling, int64_t out,
                              float (*hs)[kMaxRank]) {
  __syncthreads();  // the previous group's reads of hs are done
  for (int k = threadIdx.x; k < n * rank; k += blockDim.x) {
    hs[k / rank][k % rank] = h[(t0 + k / rank) * ldh + k % rank] * scaling;
  }
  __syncthreads();
  const int64_t o = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (o >= out) return;
  float acc[kExpandTokens];
#pragma unroll
  for (int i = 0; i < kExpandTokens; ++i) acc[i] = i < n ? y[(t0 + i) * ldy + o] : 0.0f;
  for (int r = 0; r < rank; ++r) {
    const float b = b_t[r * out + o];
#pragma unroll
    for (int i = 0; i < kExpandTokens; ++i) acc[i] = fmaf(hs[i][r], b, acc[i]);
  }
#pragma unroll
  for (int i = 0; i < kExpandTokens; ++i) {
    if (i < n) y[(t0 + i) * ldy + o] = acc[i];
  }
}

// grid: (segment, token stride). Blocks stride through their segment's tokens.
__global__ void sgmv_shrink_kernel(const float* __restrict__ x, int64_t ldx, int64_t tokens, SgmvSegmentsDevice segs,
                                   LoraSlotsDevice w, float* __restrict__ h, int64_t ldh) {
  const int32_t slot = segs.slot[blockIdx.x];
  const int rank = slot_rank(w, slot);
  if (rank == 0) return;
  const int64_t begin = max(static_cast<int64_t>(segs.token_begin[blockIdx.x]), int64_t{0});
  const int64_t end = min(static_cast<int64_t>(segs.token_end[blockIdx.x]), tokens);
  const float* a = w.a + slot * w.max_rank * w.in;
  for (int64_t t = begin + blockIdx.y; t < end; t += gridDim.y) shrink_token(x + t * ldx, a, rank, w.in, h + t * ldh);
}

// grid: (segment, out tile, token-group stride).
__global__ void sgmv_expand_kernel(const float* __restrict__ h, int64_t ldh, int64_t tokens, SgmvSegmentsDevice segs,
                                   LoraSlotsDevice w, float* __restrict__ y, int64_t ldy) {
  __shared__ float hs[kExpandTokens][kMaxRank];
  const int32_t slot = segs.slot[blockIdx.x];
  const int rank = slot_rank(w, slot);
  if (rank == 0) return;
  const int64_t begin = max(static_cast<int64_t>(segs.token_begin[blockIdx.x]), int64_t{0});
  const int64_t end = min(static_cast<int64_t>(segs.token_end[blockIdx.x]), tokens);
  const float* b_t = w.b_t + slot * w.max_rank * w.out;
  for (int64_t t0 = begin + static_cast<int64_t>(blockIdx.z) * kExpandTokens; t0 < end;
       t0 += static_cast<int64_t>(gridDim.z) * kExpandTokens) {
    const int n = static_cast<int>(min(static_cast<int64_t>(kExpandTokens), end - t0));
    expand_tokens(h, ldh, y, ldy, t0, n, b_t, rank, w.scalings[slot], w.out, hs);
  }
}

// grid: (token).
__global__ void bgmv_shrink_kernel(const float* __restrict__ x, int64_t ldx, const int32_t* __restrict__ token_slots,
                                   LoraSlotsDevice w, float* __restrict__ h, int64_t ldh) {
  const int64_t t = blockIdx.x;
  const int32_t slot = token_slots[t];
  const int rank = slot_rank(w, slot);
  if (rank == 0) return;
  shrink_token(x + t * ldx, w.a + slot * w.max_rank * w.in, rank, w.in, h + t * ldh);
}

// grid: (token, out tile).
__global__ void bgmv_expand_kernel(const float* __restrict__ h, int64_t ldh, const int32_t* __restrict__ token_slots,
                                   LoraSlotsDevice w, float* __restrict__ y, int64_t ldy) {
  __shared__ float hs[kExpandTokens][kMaxRank];
  const int64_t t = blockIdx.x;
  const int32_t slot = token_slots[t];
  const int rank = slot_rank(w, slot);
  if (rank == 0) return;
  expand_tokens(h, ldh, y, ldy, t, 1, w.b_t + slot * w.max_rank * w.out, rank, w.scalings[slot], w.out, hs);
}

// Checks shared by all four entry points; `ld_in` / `ld_out` are the leading
// dimensions of the step's input and output (x and h, or h and y).
Status check_common(const char* op, int64_t tokens, const LoraSlotsDevice& w, int64_t ld_in, int64_t need_in,
                    int64_t ld_out, int64_t need_out) {
  const std::string name(op);
  if (tokens < 0 || tokens > INT_MAX) return Status::invalid_argument(name + ": tokens " + std::to_string(tokens));
  if (w.num_slots < 0 || w.in <= 0 || w.out <= 0 || w.out > kMaxGridYZ * kThreads || w.max_rank <= 0 ||
      w.max_rank > kMaxRank) {
    return Status::invalid_argument(name + ": num_slots " + std::to_string(w.num_slots) + ", in " +
                                    std::to_string(w.in) + ", out " + std::to_string(w.out) + ", max_rank " +
                                    std::to_string(w.max_rank) + " (at most " + std::to_string(kMaxRank) + ")");
  }
  if (ld_in < need_in || ld_out < need_out) {
    return Status::invalid_argument(name + ": leading dimensions " + std::to_string(ld_in) + " and " +
                                    std::to_string(ld_out) + " below the row widths " + std::to_string(need_in) +
                                    " and " + std::to_string(need_out));
  }
  return Status::ok();
}

Status check_segments(const char* op, const SgmvSegmentsDevice& segs) {
  if (segs.count < 0 || segs.count > INT_MAX) {
    return Status::invalid_argument(std::string(op) + ": segment count " + std::to_string(segs.count));
  }
  if (segs.count > 0 && (!segs.slot || !segs.token_begin || !segs.token_end)) {
    return Status::invalid_argument(std::string(op) + ": null segment arrays");
  }
  return Status::ok();
}

bool nothing_to_do(int64_t tokens, const LoraSlotsDevice& w) { return tokens == 0 || w.num_slots == 0; }

bool weights_missing(const LoraSlotsDevice& w) { return !w.a || !w.b_t || !w.ranks || !w.scalings; }

// Enough token blocks that a balanced split gives each block about one token
// (shrink) or one token group (expand); the kernels stride, so any count is correct.
unsigned token_stride_blocks(int64_t tokens, int64_t segments, int64_t per_block) {
  const int64_t per_segment = (tokens + segments - 1) / segments;
  return static_cast<unsigned>(std::clamp<int64_t>((per_segment + per_block - 1) / per_block, 1, kMaxGridYZ));
}

unsigned out_tiles(int64_t out) { return static_cast<unsigned>((out + kThreads - 1) / kThreads); }

}  // namespace

Status sgmv_shrink(const float* x, int64_t ldx, int64_t tokens, const SgmvSegmentsDevice& segments,
                   const LoraSlotsDevice& w, float* h, int64_t ldh, void* stream) {
  LG_RETURN_IF_ERROR(check_common("sgmv_shrink", tokens, w, ldx, w.in, ldh, w.max_rank));
  LG_RETURN_IF_ERROR(check_segments("sgmv_shrink", segments));
  if (nothing_to_do(tokens, w) || segments.count == 0) return Status::ok();
  if (!x || !h || weights_missing(w)) return Status::invalid_argument("sgmv_shrink: null x, h or weights");
  const dim3 grid(static_cast<unsigned>(segments.count), token_stride_blocks(tokens, segments.count, 1));
  sgmv_shrink_kernel<<<grid, kThreads, 0, detail::as_stream(stream)>>>(x, ldx, tokens, segments, w, h, ldh);
  return detail::launch_status("sgmv_shrink launch");
}

Status sgmv_expand(const float* h, int64_t ldh, int64_t tokens, const SgmvSegmentsDevice& segments,
                   const LoraSlotsDevice& w, float* y, int64_t ldy, void* stream) {
  LG_RETURN_IF_ERROR(check_common("sgmv_expand", tokens, w, ldh, w.max_rank, ldy, w.out));
  LG_RETURN_IF_ERROR(check_segments("sgmv_expand", segments));
  if (nothing_to_do(tokens, w) || segments.count == 0) return Status::ok();
  if (!h || !y || weights_missing(w)) return Status::invalid_argument("sgmv_expand: null h, y or weights");
  const dim3 grid(static_cast<unsigned>(segments.count), out_tiles(w.out),
                  token_stride_blocks(tokens, segments.count, kExpandTokens));
  sgmv_expand_kernel<<<grid, kThreads, 0, detail::as_stream(stream)>>>(h, ldh, tokens, segments, w, y, ldy);
  return detail::launch_status("sgmv_expand launch");
}

Status bgmv_shrink(const float* x, int64_t ldx, int64_t tokens, const int32_t* token_slots, const LoraSlotsDevice& w,
                   float* h, int64_t ldh, void* stream) {
  LG_RETURN_IF_ERROR(check_common("bgmv_shrink", tokens, w, ldx, w.in, ldh, w.max_rank));
  if (nothing_to_do(tokens, w)) return Status::ok();
  if (!x || !h || !token_slots || weights_missing(w)) {
    return Status::invalid_argument("bgmv_shrink: null x, h, token_slots or weights");
  }
  bgmv_shrink_kernel<<<static_cast<unsigned>(tokens), kThreads, 0, detail::as_stream(stream)>>>(x, ldx, token_slots, w,
                                                                                                 h, ldh);
  return detail::launch_status("bgmv_shrink launch");
}

Status bgmv_expand(const float* h, int64_t ldh, int64_t tokens, const int32_t* token_slots, const LoraSlotsDevice& w,
                   float* y, int64_t ldy, void* stream) {
  LG_RETURN_IF_ERROR(check_common("bgmv_expand", tokens, w, ldh, w.max_rank, ldy, w.out));
  if (nothing_to_do(tokens, w)) return Status::ok();
  if (!h || !y || !token_slots || weights_missing(w)) {
    return Status::invalid_argument("bgmv_expand: null h, y, token_slots or weights");
  }
  const dim3 grid(static_cast<unsigned>(tokens), out_tiles(w.out));
  bgmv_expand_kernel<<<grid, kThreads, 0, detail::as_stream(stream)>>>(h, ldh, token_slots, w, y, ldy);
  return detail::launch_status("bgmv_expand launch");
}

}  // namespace loragate::cuda
