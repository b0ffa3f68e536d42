// The trainer's causal GQA attention over one sequence, forward and backward,
// in f32 as small matrix products on the server's matmul kernel.
//
// The same mathematics as attention_head_forward / attention_head_backward of
// backward_ops.h (which stay the f64-testable reference), arranged for
// speed: one call handles the query heads of one KV head, and every product
// (Q Kᵀ, P V and the five of the backward pass) is one cpu::matmul over the
// whole sequence, with the probabilities softmaxed row by row in between
// and recomputed by the backward pass. Products whose result is head_dim
// wide are computed transposed (head_dim rows of the kernel against n
// output columns), so that a small head_dim (stories260K's is 8) does not
// leave the kernel's output panels nearly empty. The products cover the full
// n × n square (the masked half is computed, then zeroed): twice the causal
// FLOPs, at the kernel's speed instead of that of per-element loops. Results
// differ from the reference only in rounding (summation order);
// tests/trainer/train_attention_test.cpp checks them against it.
//
// Thread-safe for calls writing different KV heads' columns, each with its
// own scratch. Called inside a compute_pool() run, the products run serially
// on the caller (one task per sequence and KV head is the parallelism).
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/backward_ops.h"

namespace loragate::train {

// Grown on demand; one per thread.
struct AttentionScratch {
  std::vector<float> k, v;                             // one KV head's K, V [n, d]
  std::vector<float> kt, vt, rhs_t, out_t, dk_t, dv_t;  // [d, n]
  std::vector<float> probs, dprobs, square_t;          // [n, n]
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
