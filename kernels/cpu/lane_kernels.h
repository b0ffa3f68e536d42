// The CPU element-wise, reduction and attention kernels, written once over a
// type L of 16 f32 lanes, so every ISA runs the same IEEE operations on every
// value, in the same order, and gets the same bits.
//
// Included only by ops_scalar.cpp, ops_avx2.cpp and ops_avx512.cpp, each of
// which first defines LG_LANES_TARGET (the target attribute its lane type
// needs; empty for scalar), then calls make_cpu_ops<L>() with its lane type.
// Everything here has internal linkage, so each file gets its own copy,
// compiled for its own ISA.
//
// What L provides (static functions; each acts on every lane alone unless
// it says otherwise):
//   F, I, M                    16 floats, 16 int32s, 16 booleans
//   zero(), set(x), set_i(k), iota()          iota: lane l holds l
//   load(p), store(p, v)       16 consecutive floats, any alignment
//   load_first(p, n), store_first(p, v, n)    1 <= n <= 16: only lanes < n
//                              touch memory; loaded lanes >= n are 0
//   add, sub, mul, div         IEEE, round to nearest even; mul's product is
//                              never fused into an add that follows it
//   fma(a, b, c)               a * b + c, rounded once
//   min(a, b), max(a, b)       a < b ? a : b and a > b ? a : b (x86 minps /
//                              maxps: b when either is NaN)
//   greater(a, b), first(n)    M: a > b (false with a NaN); lane < n
//   select(m, a, b), select_i  m ? a : b
//   bits(v)                    the float bits as int32
//   add_i, sub_i, half_i       int32 + and - (wrapping), >> 1 (arithmetic)
//   pow2(k)                    the float 2^k, for -126 <= k <= 127
//   store_i(p, v)              16 int32s
//   sum(v), max_lane(v)        one float: the lanes folded in halves, lane l
//                              with lane l + 8, then l + 4, l + 2, l + 1
//                              (lower + upper; max(lower, upper))
//
// The orders this fixes for every length, batch and ISA:
//  - vec_dot (and rmsnorm's sum of squares): 32 lanes held as two F
//    accumulators. Element j of each 32-element block goes into lane j % 32
//    by one fma; a final partial block is padded with zeros (an accumulator
//    it does not reach is left alone). Then the two accumulators are added
//    lane by lane and summed as above.
//  - the softmax's max and sum: one F, element j in lane j % 16.
//  - everything else works element by element.
//
// Plain float arithmetic here must not add a product either: GCC fuses one
// into an FMA in C++ by default (-ffp-contract=fast) wherever FMA is
// enabled, so the AVX2 and AVX-512 copies would round differently.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/ops_internal.h"

#ifndef LG_LANES_TARGET
#error "define LG_LANES_TARGET (the lane type's target attribute) before including lane_kernels.h"
#endif

namespace loragate::cpu::detail {
namespace {

constexpr int kLanes = 16;
constexpr float kInf = std::numeric_limits<float>::infinity();

// How many of the 16 lanes starting at element j of n are real elements.
inline int lanes_at(int64_t n, int64_t j) { return static_cast<int>(std::min<int64_t>(kLanes, n - j)); }

template <class L>
LG_LANES_TARGET typename L::F load_n(const float* p, int count) {
  return count == kLanes ? L::load(p) : L::load_first(p, count);
}

template <class L>
LG_LANES_TARGET void store_n(float* p, typename L::F v, int count) {
  if (count == kLanes) L::store(p, v);
  else L::store_first(p, v, count);
}

// e^x in every lane, by the same operations on every ISA (no libm): x = k ln2
// + r with k = round(x / ln2) and |r| <= ln2 / 2; e^r by its degree-7 Taylor
// polynomial (its truncation error is under 0.1 ulp); then 2^k, applied as
// 2^(k/2) * 2^(k - k/2) so a result that overflows or lands among the
// subnormals is rounded once. Within 1 ulp of e^x: 0.94 ulp at worst over
// every float input (checked exhaustively once; exp_test.cpp checks 1.4
// million); +inf above 88.73, 0 below -103.98, and NaN stays NaN.
template <class L>
LG_LANES_TARGET typename L::F exp_lanes(typename L::F x) {
  using F = typename L::F;
  // Beyond these bounds the result is already +inf or 0; clamping keeps k in
  // range. min and max return x when x is NaN, so NaN goes through.
  x = L::max(L::set(-104.0f), L::min(L::set(89.0f), x));
  // Adding 1.5 * 2^23 rounds x * log2(e) to the nearest integer k and leaves
  // k in the low mantissa bits of t.
  const F round_magic = L::set(0x1.8p23f);
  const F t = L::fma(x, L::set(0x1.715476p+0f), round_magic);
  const F k = L::sub(t, round_magic);
  // r = x - k ln2, with ln2 as a float plus the float nearest its remainder.
  F r = L::fma(k, L::set(-0x1.62e430p-1f), x);
  r = L::fma(k, L::set(1.9046542e-09f), r);
  F p = L::set(1.0f / 5040.0f);
  p = L::fma(p, r, L::set(1.0f / 720.0f));
  p = L::fma(p, r, L::set(1.0f / 120.0f));
  p = L::fma(p, r, L::set(1.0f / 24.0f));
  p = L::fma(p, r, L::set(1.0f / 6.0f));
  p = L::fma(p, r, L::set(0.5f));
  p = L::fma(p, r, L::set(1.0f));
  p = L::fma(p, r, L::set(1.0f));
  const auto k_int = L::sub_i(L::bits(t), L::bits(round_magic));
  const auto k_low = L::half_i(k_int);  // -75..64, as is k - k_low
  return L::mul(L::mul(p, L::pow2(k_low)), L::pow2(L::sub_i(k_int, k_low)));
}

template <class L>
LG_LANES_TARGET void exp_array(const float* x, float* y, int64_t n) {
  for (int64_t j = 0; j < n; j += kLanes) {
    const int c = lanes_at(n, j);
    store_n<L>(y + j, exp_lanes<L>(load_n<L>(x + j, c)), c);
  }
}

template <class L>
LG_LANES_TARGET float dot(const float* a, const float* b, int64_t n) {
  typename L::F acc0 = L::zero(), acc1 = L::zero();
  int64_t j = 0;
  for (; j + 2 * kLanes <= n; j += 2 * kLanes) {
    acc0 = L::fma(L::load(a + j), L::load(b + j), acc0);
    acc1 = L::fma(L::load(a + j + kLanes), L::load(b + j + kLanes), acc1);
  }
  if (j < n) {
    const int c0 = lanes_at(n, j);
    acc0 = L::fma(L::load_first(a + j, c0), L::load_first(b + j, c0), acc0);
    if (j + kLanes < n) {
      const int c1 = lanes_at(n, j + kLanes);
      acc1 = L::fma(L::load_first(a + j + kLanes, c1), L::load_first(b + j + kLanes, c1), acc1);
    }
  }
  return L::sum(L::add(acc0, acc1));
}

template <class L>
LG_LANES_TARGET void axpy(float p, const float* x, float* y, int64_t n) {
  const typename L::F vp = L::set(p);
  for (int64_t j = 0; j < n; j += kLanes) {
    const int c = lanes_at(n, j);
    store_n<L>(y + j, L::fma(vp, load_n<L>(x + j, c), load_n<L>(y + j, c)), c);
  }
}

template <class L>
LG_LANES_TARGET void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t j = 0; j < n; j += kLanes) {
    const int c = lanes_at(n, j);
    store_n<L>(y + j, L::add(load_n<L>(y + j, c), load_n<L>(x + j, c)), c);
  }
}

template <class L>
LG_LANES_TARGET void add_bias(float* x, const float* b, int64_t tokens, int64_t dim, int64_t row_stride) {
  for (int64_t t = 0; t < tokens; ++t) add_inplace<L>(x + t * row_stride, b, dim);
}

template <class L>
LG_LANES_TARGET void rmsnorm(const float* x, const float* w, float* y, int64_t tokens, int64_t dim, float eps) {
  for (int64_t t = 0; t < tokens; ++t) {
    const float* xr = x + t * dim;
    float* yr = y + t * dim;
    const float inv = 1.0f / std::sqrt(dot<L>(xr, xr, dim) / static_cast<float>(dim) + eps);
    const typename L::F vinv = L::set(inv);
    for (int64_t i = 0; i < dim; i += kLanes) {
      const int c = lanes_at(dim, i);
      store_n<L>(yr + i, L::mul(load_n<L>(w + i, c), L::mul(load_n<L>(xr + i, c), vinv)), c);
    }
  }
}

template <class L>
LG_LANES_TARGET void rope_rotate_half(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t row_stride,
                                      const float* cos, const float* sin) {
  using F = typename L::F;
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* ct = cos + t * half;
    const float* st = sin + t * half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + t * row_stride + h * head_dim;
      for (int64_t j = 0; j < half; j += kLanes) {
        const int cnt = lanes_at(half, j);
        const F a = load_n<L>(v + j, cnt), b = load_n<L>(v + j + half, cnt);
        const F c = load_n<L>(ct + j, cnt), s = load_n<L>(st + j, cnt);
        store_n<L>(v + j, L::sub(L::mul(a, c), L::mul(b, s)), cnt);
        store_n<L>(v + j + half, L::add(L::mul(b, c), L::mul(a, s)), cnt);
      }
    }
  }
}

template <class L>
LG_LANES_TARGET void silu_mul(const float* gate_up, float* out, int64_t tokens, int64_t inter) {
  using F = typename L::F;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* g = gate_up + t * 2 * inter;
    const float* u = g + inter;
    float* o = out + t * inter;
    for (int64_t i = 0; i < inter; i += kLanes) {
      const int c = lanes_at(inter, i);
      const F gv = load_n<L>(g + i, c);
      const F sig_den = L::add(L::set(1.0f), exp_lanes<L>(L::sub(L::zero(), gv)));  // 1 + e^-g
      store_n<L>(o + i, L::mul(L::div(gv, sig_den), load_n<L>(u + i, c)), c);
    }
  }
}

// The lanes past the end of a partial block hold -inf, which never wins.
template <class L>
LG_LANES_TARGET typename L::F load_or_minus_inf(const float* p, int count) {
  const typename L::F v = load_n<L>(p, count);
  return count == kLanes ? v : L::select(L::first(count), v, L::set(-kInf));
}

// One set of 16 lanes of argmax: each lane keeps the first of its largest
// elements (only a strictly greater one replaces it) and that one's index.
template <class L>
struct ArgmaxLanes {
  typename L::F best;
  typename L::I best_at, at;  // at: the indices of the block seen next
};

template <class L>
LG_LANES_TARGET void argmax_step(ArgmaxLanes<L>& lanes, typename L::F v, typename L::I step) {
  const typename L::M wins = L::greater(v, lanes.best);
  lanes.best = L::select(wins, v, lanes.best);
  lanes.best_at = L::select_i(wins, lanes.at, lanes.best_at);
  lanes.at = L::add_i(lanes.at, step);
}

template <class L>
LG_LANES_TARGET int64_t argmax(const float* x, int64_t n) {
  // Four sets of lanes take turns over 16-element blocks, so four compare /
  // select chains run side by side; then every lane is compared, ties going
  // to the lower index. The answer is one number whatever the lane layout
  // (the first of the largest), so this order needs no fixing. Indices are
  // int32 lanes: n stays below 2^31 (a vocabulary).
  constexpr int kSets = 4;
  ArgmaxLanes<L> sets[kSets];
  for (int s = 0; s < kSets; ++s) {
    sets[s].best = L::set(-kInf);
    sets[s].at = sets[s].best_at = L::add_i(L::iota(), L::set_i(s * kLanes));
  }
  const typename L::I step = L::set_i(kSets * kLanes);
  int64_t j = 0;
  for (; j + kSets * kLanes <= n; j += kSets * kLanes) {
    for (int s = 0; s < kSets; ++s) argmax_step<L>(sets[s], L::load(x + j + s * kLanes), step);
  }
  for (int s = 0; j < n; ++s, j += kLanes) argmax_step<L>(sets[s], load_or_minus_inf<L>(x + j, lanes_at(n, j)), step);
  alignas(64) float values[kSets * kLanes];
  alignas(64) int32_t where[kSets * kLanes];
  for (int s = 0; s < kSets; ++s) {
    L::store(values + s * kLanes, sets[s].best);
    L::store_i(where + s * kLanes, sets[s].best_at);
  }
  int lane = 0;
  for (int l = 1; l < kSets * kLanes; ++l) {
    if (values[l] > values[lane] || (values[l] == values[lane] && where[l] < where[lane])) lane = l;
  }
  return where[lane];
}

template <class L>
LG_LANES_TARGET float softmax_numerators(float* s, int64_t n) {
  using F = typename L::F;
  F top = L::set(-kInf);
  for (int64_t j = 0; j < n; j += kLanes) top = L::max(top, load_or_minus_inf<L>(s + j, lanes_at(n, j)));
  const F shift = L::set(L::max_lane(top));
  F total = L::zero();
  for (int64_t j = 0; j < n; j += kLanes) {
    const int c = lanes_at(n, j);
    F e = exp_lanes<L>(L::sub(load_n<L>(s + j, c), shift));
    if (c < kLanes) e = L::select(L::first(c), e, L::zero());
    store_n<L>(s + j, e, c);
    total = L::add(total, e);
  }
  return L::sum(total);
}

// The K or V row of position `pos`, KV head `kvh`, in a block-paged cache.
inline const float* cached_row(const float* base, const PagedKv& kv, const int32_t* block_table, int64_t pos,
                               int64_t kvh) {
  const int64_t block = block_table[pos / kv.block_size];
  return base + ((block * kv.block_size + pos % kv.block_size) * kv.num_kv_heads + kvh) * kv.head_dim;
}

template <class L>
LG_LANES_TARGET void paged_attention_one(const float* q, float* out, int64_t num_heads, const PagedKv& kv,
                                         const int32_t* block_table, int64_t first_pos, int64_t last_pos,
                                         float* scratch) {
  const int64_t d = kv.head_dim;
  const int64_t group = num_heads / kv.num_kv_heads;
  const int64_t n = last_pos - first_pos + 1;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t h = 0; h < num_heads; ++h) {
    const float* qh = q + h * d;
    const int64_t kvh = h / group;
    for (int64_t i = 0; i < n; ++i) {
      scratch[i] = dot<L>(qh, cached_row(kv.k, kv, block_table, first_pos + i, kvh), d) * scale;
    }
    const float inv = 1.0f / softmax_numerators<L>(scratch, n);
    // out = sum_i w_i v_i: each element accumulated by fma from 0 over the
    // positions in order (what zeroing it and an axpy per position would
    // do), 64 columns at a time in registers rather than through memory.
    float* oh = out + h * d;
    for (int64_t c = 0; c < d; c += 4 * kLanes) {
      const int64_t width = std::min<int64_t>(4 * kLanes, d - c);
      typename L::F acc[4] = {L::zero(), L::zero(), L::zero(), L::zero()};
      for (int64_t i = 0; i < n; ++i) {
        const float* v = cached_row(kv.v, kv, block_table, first_pos + i, kvh) + c;
        const typename L::F w = L::set(scratch[i] * inv);
        for (int q = 0; q < 4 && q * kLanes < width; ++q) {
          acc[q] = L::fma(w, load_n<L>(v + q * kLanes, lanes_at(width, q * kLanes)), acc[q]);
        }
      }
      for (int q = 0; q < 4 && q * kLanes < width; ++q) {
        store_n<L>(oh + c + q * kLanes, acc[q], lanes_at(width, q * kLanes));
      }
    }
  }
}

template <class L>
CpuOps make_cpu_ops() {
  return CpuOps{
      .vec_dot = &dot<L>,
      .vec_axpy = &axpy<L>,
      .rmsnorm = &rmsnorm<L>,
      .rope_rotate_half = &rope_rotate_half<L>,
      .silu_mul = &silu_mul<L>,
      .add_bias = &add_bias<L>,
      .add_inplace = &add_inplace<L>,
      .argmax = &argmax<L>,
      .paged_attention_one = &paged_attention_one<L>,
      .exp = &exp_array<L>,
      .softmax_numerators = &softmax_numerators<L>,
  };
}

}  // namespace
}  // namespace loragate::cpu::detail
