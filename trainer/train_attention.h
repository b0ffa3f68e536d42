// The trainer's causal GQA attention over one sequence, forward and backward,
// in f32 on the dispatched vector kernels (kernels/cpu/vec.h).
//
// The same mathematics as attention_head_forward / attention_head_backward of
// backward_ops.h (which stay the f64-testable reference), arranged for
// speed: one call handles the query heads of one KV head, whose K and V are
// transposed once into [head_dim, n] so that every inner loop runs along the
// keys (contiguous, vectorised, no per-element reduction chains), and the
// backward pass recomputes each query's probabilities one row at a time
// (O(n) scratch, no n × n buffers). Results differ from the reference only
// in rounding (summation order); tests/trainer/train_attention_test.cpp
// checks them against it.
//
// Thread-safe for calls writing different KV heads' columns, each with its
// own scratch.
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/backward_ops.h"

namespace loragate::train {

// Grown on demand; one per thread.
struct AttentionScratch {
  std::vector<float> kt, vt, dkt, dvt;  // [head_dim, n] each
  std::vector<float> p, dp;             // one row of probabilities and their gradients, [n]
};

// Writes the out columns of every query head of `kv_head` (q, k, v, out as
// AttentionShape describes them).
void attention_group_forward(const AttentionShape& s, int64_t kv_head, const float* q, const float* k, const float* v,
                             float* out, AttentionScratch& scratch);

// Given d_out, writes dq's columns of the query heads of `kv_head` and adds
// their contributions to dk and dv's columns of `kv_head` (the caller zeroes
// dk and dv first).
void attention_group_backward(const AttentionShape& s, int64_t kv_head, const float* q, const float* k,
                              const float* v, const float* d_out, float* dq, float* dk, float* dv,
                              AttentionScratch& scratch);

}  // namespace loragate::train
