// Private to the CPU element-wise, reduction and attention ops (vec.h, ops.h,
// paged_attention.h): one table of kernels per ISA, and the dispatch that
// picks one. Not for use outside kernels/cpu and its tests.
//
// Every table gives bit-identical results: the kernels are written once, in
// lane_kernels.h, over a 16-lane f32 type that each ISA maps to its own
// registers (ops_scalar.cpp, ops_avx2.cpp, ops_avx512.cpp).
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/paged_attention.h"

namespace loragate::cpu::detail {

using cpu::Isa;

// One ISA's kernels. The first nine have the contracts of the public
// functions of the same names.
struct CpuOps {
  float (*vec_dot)(const float* a, const float* b, int64_t n);
  void (*vec_axpy)(float p, const float* x, float* y, int64_t n);
  void (*rmsnorm)(const float* x, const float* w, float* y, int64_t tokens, int64_t dim, float eps);
  void (*rope_rotate_half)(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t row_stride,
                           const float* cos, const float* sin);
  void (*silu_mul)(const float* gate_up, float* out, int64_t tokens, int64_t inter);
  void (*add_bias)(float* x, const float* b, int64_t tokens, int64_t dim, int64_t row_stride);
  void (*add_inplace)(float* y, const float* x, int64_t n);
  int64_t (*argmax)(const float* x, int64_t n);
  void (*paged_attention_one)(const float* q, float* out, int64_t num_heads, const PagedKv& kv,
                              const int32_t* block_table, int64_t first_pos, int64_t last_pos, float* scratch);
  // y[i] = e^x[i]: the exp silu_mul and the attention's softmax use (y may alias x).
  void (*exp)(const float* x, float* y, int64_t n);
  // s[i] = e^(s[i] - max_j s[j]); returns their sum: the softmax before its division.
  float (*softmax_numerators)(float* s, int64_t n);
};

// The table for `isa`, which the CPU must support.
const CpuOps& ops_for(Isa isa);

// The table for best_isa(), looked up once: what the public functions use.
const CpuOps& ops();

// Each ISA's table.
const CpuOps& scalar_ops();
const CpuOps& avx2_ops();
const CpuOps& avx512_ops();

}  // namespace loragate::cpu::detail
