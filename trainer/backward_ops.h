// The backward passes of a Llama layer's ops, for LoRA training, next to the
// forward ops they invert where the server's kernels do not return what the
// backward pass needs (attention probabilities, log-sum-exp).
//
// Templated on the scalar type: the trainer runs them in f32, the tests in
// f64 against finite differences. Row-major, rows = tokens. Pure functions;
// thread-safe. "d" names the gradient of the loss w.r.t. what follows it.
#pragma once

#include <cstdint>

namespace loragate::train {

// y = x / sqrt(mean(x^2) + eps) * w over each row of `dim`: given x, w and dy,
// writes dx (overwrites; w is frozen and gets no gradient).
template <typename T>
void rmsnorm_backward(const T* x, const float* w, const T* dy, T* dx, int64_t rows, int64_t dim, double eps);

// The rotate_half rotation of kernels/cpu/ops.h is orthogonal, so its
// backward is the rotation by -angle: in place on d = [rows, heads, head_dim]
// with row stride `row_stride`, cos/sin [rows, head_dim / 2].
template <typename T>
void rope_backward(T* d, int64_t rows, int64_t heads, int64_t head_dim, int64_t row_stride, const float* cos,
                   const float* sin);

// out = silu(g) * u with gate_up = [rows, 2 * inter] (g then u): given d_out,
// writes d_gate_up [rows, 2 * inter].
template <typename T>
void silu_mul_backward(const T* gate_up, const T* d_out, T* d_gate_up, int64_t rows, int64_t inter);

// Causal attention of one sequence of n tokens, GQA, scale 1/sqrt(head_dim),
// each query attending to positions (i - window, i] when window > 0:
//   q [n, heads * head_dim] (stride ldq), k, v [n, kv_heads * head_dim]
//   (strides ldk, ldv), out [n, heads * head_dim] (stride ldo).
struct AttentionShape {
  int64_t n = 0, heads = 0, kv_heads = 0, head_dim = 0, window = 0;
  int64_t ldq = 0, ldk = 0, ldv = 0, ldo = 0;
};

// One head's forward: writes out's columns of `head`. `probs` holds n * n
// scratch (the head's softmax rows, kept for nothing after the call).
template <typename T>
void attention_head_forward(const AttentionShape& s, int64_t head, const T* q, const T* k, const T* v, T* out,
                            T* probs);

// One head's backward: recomputes the head's probabilities from q and k,
// then adds this head's contributions to dq (its own columns: overwritten),
// dk and dv (the columns of its KV head: accumulated, several query heads
// share one KV head, so the caller zeroes them first and must not run two
// heads of one KV group at once). Scratch: probs and dprobs, n * n each.
template <typename T>
void attention_head_backward(const AttentionShape& s, int64_t head, const T* q, const T* k, const T* v,
                             const T* d_out, T* dq, T* dk, T* dv, T* probs, T* dprobs);

// Cross-entropy of one row of logits against `target`: returns
// logsumexp(logits) - logits[target] (computed in double), and with
// d_logits writes scale * (softmax(logits) - onehot(target)).
template <typename T>
double cross_entropy(const T* logits, int64_t vocab, int32_t target, float scale, T* d_logits);

}  // namespace loragate::train
