// The LoRA training forward and backward pass; see train_model.h.
#include "trainer/train_model.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>

#include "engine/rope_tables.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/vec.h"
#include "trainer/backward_ops.h"
#include "trainer/dense.h"
#include "trainer/train_attention.h"

namespace loragate::train {
namespace {

// Rows of logits computed at once: bounds the [rows, vocab] buffer.
constexpr int64_t kLogitChunk = 256;

// cross_entropy() of backward_ops.h on the vector kernels: the exponentials
// in f32 (vocab of them per loss row; glibc's exp in f64 was a tenth of a
// small model's step), their sum's log in f64. `logits` is scratch: without
// d_logits, the exponentials overwrite it.
double row_cross_entropy(float* logits, int64_t vocab, int32_t target, float scale, float* d_logits) {
  const double top = logits[cpu::argmax(logits, vocab)];
  const double at_target = logits[target];
  float* e = logits;
  if (d_logits != nullptr) {
    std::copy(logits, logits + vocab, d_logits);
    e = d_logits;
  }
  const float sum = cpu::vec_softmax_numerators(e, vocab);  // e = exp(logits - top)
  if (d_logits != nullptr) {
    const float k = scale / sum;
    for (int64_t i = 0; i < vocab; ++i) d_logits[i] *= k;
    d_logits[target] -= scale;
  }
  return top + std::log(static_cast<double>(sum)) - at_target;
}

// The element-wise ops between the matmuls work row by row: fn(r0, r1) over
// [0, rows) in blocks, on the compute threads.
template <class Fn>
void for_row_blocks(int64_t rows, const Fn& fn) {
  constexpr int64_t kRowsPerTask = 32;
  const int64_t blocks = (rows + kRowsPerTask - 1) / kRowsPerTask;
  cpu::ThreadPool& pool = cpu::compute_pool();
  if (blocks < 2 || pool.size() < 2) {
    fn(int64_t{0}, rows);
    return;
  }
  std::atomic<int64_t> next{0};
  pool.run(static_cast<int>(std::min<int64_t>(blocks, pool.size())), [&](int, int) {
    for (int64_t b; (b = next.fetch_add(1, std::memory_order_relaxed)) < blocks;) {
      fn(b * kRowsPerTask, std::min(rows, (b + 1) * kRowsPerTask));
    }
  });
}

// Column `row` of a packed matrix, as a row of its transpose.
class TransposedSource : public cpu::PackedMatrix::RowSource {
 public:
  explicit TransposedSource(const cpu::PackedMatrix& w) : w_(w) {}
  void read_row(int64_t row, float* out) const override {
    for (int64_t r = 0; r < w_.rows(); ++r) out[r] = w_.at(r, row);
  }

 private:
  const cpu::PackedMatrix& w_;
};

// A packed matrix's rows, dequantised.
class DequantizedSource : public cpu::PackedMatrix::RowSource {
 public:
  explicit DequantizedSource(const cpu::PackedMatrix& w) : w_(w) {}
  void read_row(int64_t row, float* out) const override {
    for (int64_t c = 0; c < w_.cols(); ++c) out[c] = w_.at(row, c);
  }

 private:
  const cpu::PackedMatrix& w_;
};

// The backward pass reads Wᵀ: f32 and bf16 bases keep their precision, a
// quantised base's dequantised values are held in bf16 (re-quantising along
// the other axis would change them).
cpu::PackedMatrix pack_transposed(const cpu::PackedMatrix& w) {
  const WeightType storage = w.storage() == WeightType::kF32 ? WeightType::kF32 : WeightType::kBF16;
  return cpu::PackedMatrix::pack_rows(TransposedSource(w), w.cols(), w.rows(), storage);
}

// The forward pass of a quantised base multiplies by its dequantised weights
// in bf16, QLoRA-style, as the backward pass does: the serving kernels
// quantise the activations too (W8A8, W4A8), which would make the loss a
// step function of the adapter's parameters, with gradients that are not
// its own. Empty for f32 and bf16 bases, which train on their own weights.
cpu::PackedMatrix pack_forward(const cpu::PackedMatrix& w) {
  if (!is_quantized(w.storage())) return {};
  return cpu::PackedMatrix::pack_rows(DequantizedSource(w), w.rows(), w.cols(), WeightType::kBF16);
}

}  // namespace

struct TrainModel::Impl {
  // What one layer's backward pass reads from its forward pass.
  struct LayerActivations {
    std::vector<float> x;        // [N, h] the layer's input (residual stream)
    std::vector<float> normed1;  // [N, h]
    std::vector<float> qkv;      // [N, qkv] after RoPE
    std::vector<float> attn;     // [N, q_out]
    std::vector<float> x_mid;    // [N, h] after the attention residual
    std::vector<float> normed2;  // [N, h]
    std::vector<float> gate_up;  // [N, 2 * inter] before SiLU
    std::vector<float> act;      // [N, inter]
    std::array<std::vector<float>, kLoraModuleCount> z;  // [N, rank]: x · Aᵀ of each targeted module
  };

  const LlamaModel& base;
  ModelConfig c;
  std::vector<float> inv_freq;
  struct Matrices {
    cpu::PackedMatrix qkv, o, gate_up, down;
  };
  std::vector<Matrices> transposed;
  cpu::PackedMatrix lm_head_t;
  std::vector<Matrices> forward;  // quantised bases: pack_forward() of each
  cpu::PackedMatrix lm_head_f;

  // What the forward pass multiplies by: the base's matrix, or its forward copy.
  static const cpu::PackedMatrix& fwd(const cpu::PackedMatrix& base_w, const cpu::PackedMatrix& copy) {
    return copy.empty() ? base_w : copy;
  }

  // Per call: the batch laid end to end.
  std::vector<int64_t> seq_begin;  // [S + 1]
  std::vector<int32_t> tokens, positions;
  std::vector<float> cos, sin;
  std::vector<LayerActivations> acts;
  std::vector<float> x_final;
  // Scratch.
  std::vector<float> tmp, tmp2, grad, grad2, d_qkv, d_gate_up, logits, d_logits, normed_rows, d_rows, trans_b,
      dz, db_t;
  std::vector<int64_t> loss_rows;
  std::vector<int32_t> loss_targets;

  Impl(const LlamaModel& b) : base(b), c(b.config()), inv_freq(rope_inv_freq(c)) {}

  int64_t h() const { return c.hidden_size; }
  int64_t q_out() const { return c.num_attention_heads * c.head_dim; }
  int64_t kv_out() const { return c.num_key_value_heads * c.head_dim; }
  int64_t qkv_width() const { return q_out() + 2 * kv_out(); }
  int64_t inter() const { return c.intermediate_size; }
  float eps() const { return static_cast<float>(c.rms_norm_eps); }

  LossSum run(std::span<const TrainExample* const> batch, const LoraParams& params, LoraParams* grads,
              float grad_scale);
  void lay_out(std::span<const TrainExample* const> batch);
  void lora_forward(const LoraParams& params, int64_t layer, LoraModule m, const float* x, int64_t ldx, float* y,
                    int64_t ldy, LayerActivations& a);
  void lora_backward(const LoraParams& params, LoraParams* grads, int64_t layer, LoraModule m, const float* x,
                     int64_t ldx, const float* dy, int64_t ldy, float* dx, int64_t lddx, const LayerActivations& a);
  void attention_forward(LayerActivations& a);
  void attention_backward(const LayerActivations& a, const float* d_attn, float* d_qkv);
  LossSum head(const LoraParams& params, bool backward, float grad_scale, float* dx);
  // dx += the RMSNorm backward (input x, weight w) of dy, the gradient w.r.t. the norm's output.
  void norm_backward_into(const float* x, const float* w, const float* dy, float* dx);
};

void TrainModel::Impl::lay_out(std::span<const TrainExample* const> batch) {
  seq_begin.assign(1, 0);
  tokens.clear();
  positions.clear();
  loss_rows.clear();
  loss_targets.clear();
  for (const TrainExample* e : batch) {
    const int64_t begin = static_cast<int64_t>(tokens.size());
    for (size_t t = 0; t < e->ids.size(); ++t) {
      tokens.push_back(e->ids[t]);
      positions.push_back(static_cast<int32_t>(t));
      // Position t - 1 predicts a target at t.
      if (t > 0 && e->target[t]) {
        loss_rows.push_back(begin + static_cast<int64_t>(t) - 1);
        loss_targets.push_back(e->ids[t]);
      }
    }
    seq_begin.push_back(static_cast<int64_t>(tokens.size()));
  }
  const size_t half = inv_freq.size();
  cos.resize(tokens.size() * half);
  sin.resize(tokens.size() * half);
  rope_tables(inv_freq, positions.data(), tokens.size(), cos.data(), sin.data());
}

void TrainModel::Impl::lora_forward(const LoraParams& params, int64_t layer, LoraModule m, const float* x,
                                    int64_t ldx, float* y, int64_t ldy, LayerActivations& a) {
  const LoraParam* p = params.find(layer, m);
  if (p == nullptr) return;
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<float>& z = a.z[static_cast<size_t>(lora_module_index(m))];
  z.resize(static_cast<size_t>(n * p->rank));
  dense_nt(x, n, p->in, ldx, p->a.data(), p->rank, z.data(), p->rank, 1.0f, false);
  dense_nt(z.data(), n, p->rank, p->rank, p->b.data(), p->out, y, ldy, params.scaling(), true);
}

// With y = W x + s·B(A x) and z = A x:  dB += s·dyᵀ z,  dz = s·dy B,
// dA += dzᵀ x,  dx += dz A (the W x part of dx is the caller's).
void TrainModel::Impl::lora_backward(const LoraParams& params, LoraParams* grads, int64_t layer, LoraModule m,
                                     const float* x, int64_t ldx, const float* dy, int64_t ldy, float* dx,
                                     int64_t lddx, const LayerActivations& a) {
  const LoraParam* p = params.find(layer, m);
  if (p == nullptr) return;
  LoraParam* g = grads->find(layer, m);
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t r = p->rank;
  const float s = params.scaling();
  const std::vector<float>& z = a.z[static_cast<size_t>(lora_module_index(m))];
  // dB [out, r] += s · dyᵀ z, gathered as dBᵀ [r, out] along dy's rows (no transposes of activations).
  db_t.assign(static_cast<size_t>(r * p->out), 0.0f);
  dense_tn_accumulate(z.data(), n, r, r, dy, p->out, ldy, db_t.data(), p->out, s);
  for (int64_t o = 0; o < p->out; ++o) {
    float* grad_b_row = g->grad_b.data() + o * r;
    for (int64_t c = 0; c < r; ++c) grad_b_row[c] += db_t[static_cast<size_t>(c * p->out + o)];
  }
  // dz [n, r] = s · dy [n, out] · B [out, r]
  transpose(p->b.data(), p->out, r, r, trans_b);
  dz.resize(static_cast<size_t>(n * r));
  dense_nt(dy, n, p->out, ldy, trans_b.data(), r, dz.data(), r, s, false);
  // dA [r, in] += dzᵀ x
  dense_tn_accumulate(dz.data(), n, r, r, x, p->in, ldx, g->grad_a.data(), p->in, 1.0f);
  // dx [n, in] += dz [n, r] · A [r, in]
  transpose(p->a.data(), r, p->in, p->in, trans_b);
  dense_nt(dz.data(), n, r, r, trans_b.data(), p->in, dx, lddx, 1.0f, true);
}

// One task per (sequence, KV head): its query heads share the transposed K and V.
void TrainModel::Impl::attention_forward(LayerActivations& a) {
  const int64_t num_seqs = static_cast<int64_t>(seq_begin.size()) - 1;
  const int64_t kv_heads = c.num_key_value_heads;
  cpu::ThreadPool& pool = cpu::compute_pool();
  const int64_t items = num_seqs * kv_heads;
  std::atomic<int64_t> next{0};
  pool.run(static_cast<int>(std::clamp<int64_t>(items, 1, pool.size())), [&](int, int) {
    thread_local AttentionScratch scratch;
    for (int64_t it; (it = next.fetch_add(1, std::memory_order_relaxed)) < items;) {
      const int64_t seq = it / kv_heads, kv_head = it % kv_heads;
      const int64_t b = seq_begin[static_cast<size_t>(seq)];
      const AttentionShape s{seq_begin[static_cast<size_t>(seq) + 1] - b, c.num_attention_heads, kv_heads, c.head_dim,
                             c.sliding_window, qkv_width(), qkv_width(), qkv_width(), q_out()};
      const float* row = a.qkv.data() + b * qkv_width();
      attention_group_forward(s, kv_head, row, row + q_out(), row + q_out() + kv_out(), a.attn.data() + b * q_out(),
                              scratch);
    }
  });
}

// d_qkv gets dq, dk, dv (before the RoPE backward). A task owns one KV head's
// dk, dv columns of one sequence: its query heads all add into them.
void TrainModel::Impl::attention_backward(const LayerActivations& a, const float* d_attn, float* d_qkv_out) {
  const int64_t num_seqs = static_cast<int64_t>(seq_begin.size()) - 1;
  const int64_t kv_heads = c.num_key_value_heads;
  const int64_t n_all = static_cast<int64_t>(tokens.size());
  std::fill(d_qkv_out, d_qkv_out + n_all * qkv_width(), 0.0f);
  cpu::ThreadPool& pool = cpu::compute_pool();
  const int64_t items = num_seqs * kv_heads;
  std::atomic<int64_t> next{0};
  pool.run(static_cast<int>(std::clamp<int64_t>(items, 1, pool.size())), [&](int, int) {
    thread_local AttentionScratch scratch;
    for (int64_t it; (it = next.fetch_add(1, std::memory_order_relaxed)) < items;) {
      const int64_t seq = it / kv_heads, kv_head = it % kv_heads;
      const int64_t b = seq_begin[static_cast<size_t>(seq)];
      const AttentionShape s{seq_begin[static_cast<size_t>(seq) + 1] - b, c.num_attention_heads, kv_heads,
                             c.head_dim, c.sliding_window, qkv_width(), qkv_width(), qkv_width(), q_out()};
      const float* row = a.qkv.data() + b * qkv_width();
      float* drow = d_qkv_out + b * qkv_width();
      attention_group_backward(s, kv_head, row, row + q_out(), row + q_out() + kv_out(), d_attn + b * q_out(), drow,
                               drow + q_out(), drow + q_out() + kv_out(), scratch);
    }
  });
}

// Final norm, lm_head and cross-entropy over the loss rows, in chunks; with
// `backward`, writes the gradient w.r.t. the last layer's output into dx.
LossSum TrainModel::Impl::head(const LoraParams&, bool backward, float grad_scale, float* dx) {
  const int64_t vocab = c.vocab_size;
  const int64_t rows = static_cast<int64_t>(loss_rows.size());
  LossSum loss;
  loss.tokens = rows;
  const LlamaWeights& w = base.weights();
  for (int64_t r0 = 0; r0 < rows; r0 += kLogitChunk) {
    const int64_t m = std::min(kLogitChunk, rows - r0);
    normed_rows.resize(static_cast<size_t>(m * h()));
    for (int64_t i = 0; i < m; ++i) {
      const float* x = x_final.data() + loss_rows[static_cast<size_t>(r0 + i)] * h();
      cpu::rmsnorm(x, w.final_norm().data(), normed_rows.data() + i * h(), 1, h(), eps());
    }
    logits.resize(static_cast<size_t>(m * vocab));
    matmul_rows(normed_rows.data(), m, h(), fwd(w.lm_head(), lm_head_f), logits.data(), vocab);
    if (backward) d_logits.resize(static_cast<size_t>(m * vocab));
    for (int64_t i = 0; i < m; ++i) {
      loss.nll += row_cross_entropy(logits.data() + i * vocab, vocab, loss_targets[static_cast<size_t>(r0 + i)],
                                    grad_scale, backward ? d_logits.data() + i * vocab : nullptr);
    }
    if (!backward) continue;
    d_rows.resize(static_cast<size_t>(m * h()));
    matmul_rows(d_logits.data(), m, vocab, lm_head_t, d_rows.data(), h());
    for (int64_t i = 0; i < m; ++i) {
      const int64_t row = loss_rows[static_cast<size_t>(r0 + i)];
      rmsnorm_backward(x_final.data() + row * h(), w.final_norm().data(), d_rows.data() + i * h(),
                       normed_rows.data() + i * h(), 1, h(), c.rms_norm_eps);
      // A position is a loss row at most once: add, do not assign, for clarity.
      for (int64_t j = 0; j < h(); ++j) dx[row * h() + j] += normed_rows[static_cast<size_t>(i * h() + j)];
    }
  }
  return loss;
}

void TrainModel::Impl::norm_backward_into(const float* x, const float* w, const float* dy, float* dx) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  tmp.resize(static_cast<size_t>(n * h()));
  for_row_blocks(n, [&](int64_t r0, int64_t r1) {
    const int64_t at = r0 * h();
    rmsnorm_backward(x + at, w, dy + at, tmp.data() + at, r1 - r0, h(), c.rms_norm_eps);
    cpu::add_inplace(dx + at, tmp.data() + at, (r1 - r0) * h());
  });
}

LossSum TrainModel::Impl::run(std::span<const TrainExample* const> batch, const LoraParams& params, LoraParams* grads,
                              float grad_scale) {
  lay_out(batch);
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t L = c.num_hidden_layers;
  const LlamaWeights& w = base.weights();
  acts.resize(static_cast<size_t>(L));
  std::vector<float> x(static_cast<size_t>(n * h()));
  for (int64_t t = 0; t < n; ++t) w.embed(tokens[static_cast<size_t>(t)], x.data() + t * h());

  for (int64_t l = 0; l < L; ++l) {
    const LayerWeights& lw = w.layers()[static_cast<size_t>(l)];
    const Matrices& lf = forward[static_cast<size_t>(l)];
    LayerActivations& a = acts[static_cast<size_t>(l)];
    a.x = x;
    a.normed1.resize(x.size());
    for_row_blocks(n, [&](int64_t r0, int64_t r1) {
      cpu::rmsnorm(x.data() + r0 * h(), lw.input_norm.data(), a.normed1.data() + r0 * h(), r1 - r0, h(), eps());
    });
    a.qkv.resize(static_cast<size_t>(n * qkv_width()));
    matmul_rows(a.normed1.data(), n, h(), fwd(lw.qkv, lf.qkv), a.qkv.data(), qkv_width());
    if (!lw.qkv_bias.empty()) cpu::add_bias(a.qkv.data(), lw.qkv_bias.data(), n, qkv_width(), qkv_width());
    lora_forward(params, l, LoraModule::kQ, a.normed1.data(), h(), a.qkv.data(), qkv_width(), a);
    lora_forward(params, l, LoraModule::kK, a.normed1.data(), h(), a.qkv.data() + q_out(), qkv_width(), a);
    lora_forward(params, l, LoraModule::kV, a.normed1.data(), h(), a.qkv.data() + q_out() + kv_out(), qkv_width(), a);
    for_row_blocks(n, [&](int64_t r0, int64_t r1) {
      float* rows = a.qkv.data() + r0 * qkv_width();
      const int64_t half = c.head_dim / 2;
      cpu::rope_rotate_half(rows, r1 - r0, c.num_attention_heads, c.head_dim, qkv_width(), cos.data() + r0 * half,
                            sin.data() + r0 * half);
      cpu::rope_rotate_half(rows + q_out(), r1 - r0, c.num_key_value_heads, c.head_dim, qkv_width(),
                            cos.data() + r0 * half, sin.data() + r0 * half);
    });
    a.attn.resize(static_cast<size_t>(n * q_out()));
    attention_forward(a);
    tmp.resize(static_cast<size_t>(n * h()));
    matmul_rows(a.attn.data(), n, q_out(), fwd(lw.o, lf.o), tmp.data(), h());
    lora_forward(params, l, LoraModule::kO, a.attn.data(), q_out(), tmp.data(), h(), a);
    a.x_mid.resize(x.size());
    a.normed2.resize(x.size());
    for_row_blocks(n, [&](int64_t r0, int64_t r1) {
      const int64_t at = r0 * h(), len = (r1 - r0) * h();
      cpu::add_inplace(x.data() + at, tmp.data() + at, len);
      std::copy(x.data() + at, x.data() + at + len, a.x_mid.data() + at);
      cpu::rmsnorm(x.data() + at, lw.post_attn_norm.data(), a.normed2.data() + at, r1 - r0, h(), eps());
    });
    a.gate_up.resize(static_cast<size_t>(n * 2 * inter()));
    matmul_rows(a.normed2.data(), n, h(), fwd(lw.gate_up, lf.gate_up), a.gate_up.data(), 2 * inter());
    lora_forward(params, l, LoraModule::kGate, a.normed2.data(), h(), a.gate_up.data(), 2 * inter(), a);
    lora_forward(params, l, LoraModule::kUp, a.normed2.data(), h(), a.gate_up.data() + inter(), 2 * inter(), a);
    a.act.resize(static_cast<size_t>(n * inter()));
    for_row_blocks(n, [&](int64_t r0, int64_t r1) {
      cpu::silu_mul(a.gate_up.data() + r0 * 2 * inter(), a.act.data() + r0 * inter(), r1 - r0, inter());
    });
    matmul_rows(a.act.data(), n, inter(), fwd(lw.down, lf.down), tmp.data(), h());
    lora_forward(params, l, LoraModule::kDown, a.act.data(), inter(), tmp.data(), h(), a);
    for_row_blocks(n, [&](int64_t r0, int64_t r1) {
      cpu::add_inplace(x.data() + r0 * h(), tmp.data() + r0 * h(), (r1 - r0) * h());
    });
  }
  x_final = std::move(x);

  const bool backward = grads != nullptr;
  std::vector<float> dx(backward ? static_cast<size_t>(n * h()) : 0, 0.0f);
  const LossSum loss = head(params, backward, grad_scale, dx.data());
  if (!backward) return loss;

  for (int64_t l = L - 1; l >= 0; --l) {
    const LayerWeights& lw = w.layers()[static_cast<size_t>(l)];
    const Matrices& wt = transposed[static_cast<size_t>(l)];
    const LayerActivations& a = acts[static_cast<size_t>(l)];
    // MLP: x_out = x_mid + down(silu(gate) * up) of normed2.
    grad.resize(static_cast<size_t>(n * inter()));
    matmul_rows(dx.data(), n, h(), wt.down, grad.data(), inter());
    lora_backward(params, grads, l, LoraModule::kDown, a.act.data(), inter(), dx.data(), h(), grad.data(), inter(), a);
    d_gate_up.resize(static_cast<size_t>(n * 2 * inter()));
    for_row_blocks(n, [&](int64_t r0, int64_t r1) {
      silu_mul_backward(a.gate_up.data() + r0 * 2 * inter(), grad.data() + r0 * inter(),
                        d_gate_up.data() + r0 * 2 * inter(), r1 - r0, inter());
    });
    grad2.resize(static_cast<size_t>(n * h()));
    matmul_rows(d_gate_up.data(), n, 2 * inter(), wt.gate_up, grad2.data(), h());
    lora_backward(params, grads, l, LoraModule::kGate, a.normed2.data(), h(), d_gate_up.data(), 2 * inter(),
                  grad2.data(), h(), a);
    lora_backward(params, grads, l, LoraModule::kUp, a.normed2.data(), h(), d_gate_up.data() + inter(), 2 * inter(),
                  grad2.data(), h(), a);
    norm_backward_into(a.x_mid.data(), lw.post_attn_norm.data(), grad2.data(), dx.data());  // dx is now d x_mid

    // Attention: x_mid = x + o(attention(rope(qkv of normed1))).
    grad.resize(static_cast<size_t>(n * q_out()));
    matmul_rows(dx.data(), n, h(), wt.o, grad.data(), q_out());
    lora_backward(params, grads, l, LoraModule::kO, a.attn.data(), q_out(), dx.data(), h(), grad.data(), q_out(), a);
    d_qkv.resize(static_cast<size_t>(n * qkv_width()));
    attention_backward(a, grad.data(), d_qkv.data());
    for_row_blocks(n, [&](int64_t r0, int64_t r1) {
      float* rows = d_qkv.data() + r0 * qkv_width();
      const int64_t half = c.head_dim / 2;
      rope_backward(rows, r1 - r0, c.num_attention_heads, c.head_dim, qkv_width(), cos.data() + r0 * half,
                    sin.data() + r0 * half);
      rope_backward(rows + q_out(), r1 - r0, c.num_key_value_heads, c.head_dim, qkv_width(), cos.data() + r0 * half,
                    sin.data() + r0 * half);
    });
    matmul_rows(d_qkv.data(), n, qkv_width(), wt.qkv, grad2.data(), h());
    lora_backward(params, grads, l, LoraModule::kQ, a.normed1.data(), h(), d_qkv.data(), qkv_width(), grad2.data(),
                  h(), a);
    lora_backward(params, grads, l, LoraModule::kK, a.normed1.data(), h(), d_qkv.data() + q_out(), qkv_width(),
                  grad2.data(), h(), a);
    lora_backward(params, grads, l, LoraModule::kV, a.normed1.data(), h(), d_qkv.data() + q_out() + kv_out(),
                  qkv_width(), grad2.data(), h(), a);
    norm_backward_into(a.x.data(), lw.input_norm.data(), grad2.data(), dx.data());  // dx is now d x (layer input)
  }
  // The embedding is frozen and not adapted: the gradient stops here.
  return loss;
}

Result<std::unique_ptr<TrainModel>> TrainModel::create(const LlamaModel& base) {
  const LlamaWeights& w = base.weights();
  if (w.storage() == WeightType::kInt8Outlier) {
    return Status::unsupported("training on int8-outlier storage is not supported; use int8 (same weights)");
  }
  auto impl = std::make_unique<Impl>(base);
  for (const LayerWeights& lw : w.layers()) {
    impl->transposed.push_back({pack_transposed(lw.qkv), pack_transposed(lw.o), pack_transposed(lw.gate_up),
                                pack_transposed(lw.down)});
    impl->forward.push_back({pack_forward(lw.qkv), pack_forward(lw.o), pack_forward(lw.gate_up),
                             pack_forward(lw.down)});
  }
  impl->lm_head_t = pack_transposed(w.lm_head());
  impl->lm_head_f = pack_forward(w.lm_head());
  return std::unique_ptr<TrainModel>(new TrainModel(std::move(impl)));
}

TrainModel::TrainModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TrainModel::~TrainModel() = default;

const ModelConfig& TrainModel::config() const { return impl_->c; }

LossSum TrainModel::forward_backward(std::span<const TrainExample* const> batch, LoraParams& params,
                                     float grad_scale) {
  return impl_->run(batch, params, &params, grad_scale);
}

LossSum TrainModel::loss(std::span<const TrainExample* const> batch, const LoraParams& params) {
  return impl_->run(batch, params, nullptr, 0.0f);
}

}  // namespace loragate::train
