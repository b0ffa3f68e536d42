// The trainer's attention as small matrix products; see train_attention.h.
#include "trainer/train_attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/vec.h"
#include "trainer/dense.h"

namespace loragate::train {
namespace {

// The first key position query i attends to.
int64_t first_attended(const AttentionShape& s, int64_t i) {
  return s.window > 0 ? std::max<int64_t>(0, i - s.window + 1) : 0;
}

// dst [n, d] contiguous = the d columns at src of n rows ld apart.
void gather_columns(const float* src, int64_t n, int64_t d, int64_t ld, std::vector<float>& dst) {
  dst.resize(static_cast<size_t>(n * d));
  for (int64_t j = 0; j < n; ++j) std::copy(src + j * ld, src + j * ld + d, dst.data() + j * d);
}

cpu::PackedMatrix pack_f32(const float* m, int64_t rows, int64_t cols) {
  return cpu::PackedMatrix::pack(m, DType::kF32, rows, cols, WeightType::kF32);
}

// y_t [d, n] = x_t [d, n] · Mᵀ for a square M [n, n]: a product whose result
// is head_dim wide, computed transposed so that the kernel's rows are the
// few head_dim ones and its output panels the n positions.
void times_transposed(const std::vector<float>& x_t, int64_t d, int64_t n, const float* m, std::vector<float>& y_t) {
  y_t.resize(static_cast<size_t>(d * n));
  cpu::matmul(x_t.data(), d, n, pack_f32(m, n, n), y_t.data(), n);
}

// Row i of scores [n, n] becomes softmax_j(scale · scores_ij) over the keys
// query i attends to, and 0 elsewhere.
void softmax_rows(const AttentionShape& s, float scale, float* scores) {
  const int64_t n = s.n;
  for (int64_t i = 0; i < n; ++i) {
    float* row = scores + i * n;
    const int64_t lo = first_attended(s, i), len = i - lo + 1;
    std::fill(row, row + lo, 0.0f);
    std::fill(row + i + 1, row + n, 0.0f);
    for (int64_t j = lo; j <= i; ++j) row[j] *= scale;
    const float inv = 1.0f / cpu::vec_softmax_numerators(row + lo, len);
    for (int64_t j = lo; j <= i; ++j) row[j] *= inv;
  }
}

}  // namespace

// Per query head h of the group: P = softmax(scale · Q_h Kᵀ) (causal),
// O_hᵀ = Vᵀ Pᵀ.
void attention_group_forward(const AttentionShape& s, int64_t kv_head, const float* q, const float* k, const float* v,
                             float* out, AttentionScratch& w) {
  const int64_t n = s.n, d = s.head_dim, group = s.heads / s.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  gather_columns(k + kv_head * d, n, d, s.ldk, w.k);
  const cpu::PackedMatrix keys = pack_f32(w.k.data(), n, d);
  transpose(v + kv_head * d, n, d, s.ldv, w.vt);
  w.probs.resize(static_cast<size_t>(n * n));
  for (int64_t head = kv_head * group; head < (kv_head + 1) * group; ++head) {
    cpu::matmul(q + head * d, n, s.ldq, keys, w.probs.data(), n);
    softmax_rows(s, scale, w.probs.data());
    times_transposed(w.vt, d, n, w.probs.data(), w.out_t);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t x = 0; x < d; ++x) out[i * s.ldo + head * d + x] = w.out_t[static_cast<size_t>(x * n + i)];
  }
}

// Per query head h, with P recomputed:
//   dP = dO_h Vᵀ,  dS = P ∘ (dP - rowsum(P ∘ dP)) · scale,
//   dQ_hᵀ = Kᵀ dSᵀ,  dKᵀ += Q_hᵀ dS,  dVᵀ += dO_hᵀ P.
void attention_group_backward(const AttentionShape& s, int64_t kv_head, const float* q, const float* k,
                              const float* v, const float* d_out, float* dq, float* dk, float* dv,
                              AttentionScratch& w) {
  const int64_t n = s.n, d = s.head_dim, group = s.heads / s.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  gather_columns(k + kv_head * d, n, d, s.ldk, w.k);
  const cpu::PackedMatrix keys = pack_f32(w.k.data(), n, d);
  transpose(w.k.data(), n, d, d, w.kt);
  gather_columns(v + kv_head * d, n, d, s.ldv, w.v);
  const cpu::PackedMatrix values = pack_f32(w.v.data(), n, d);
  w.probs.resize(static_cast<size_t>(n * n));
  w.dprobs.resize(static_cast<size_t>(n * n));
  w.dk_t.assign(static_cast<size_t>(d * n), 0.0f);
  w.dv_t.assign(static_cast<size_t>(d * n), 0.0f);
  float* p = w.probs.data();
  float* ds = w.dprobs.data();
  for (int64_t head = kv_head * group; head < (kv_head + 1) * group; ++head) {
    const float* qh = q + head * d;
    const float* doh = d_out + head * d;
    cpu::matmul(qh, n, s.ldq, keys, p, n);
    softmax_rows(s, scale, p);
    cpu::matmul(doh, n, s.ldo, values, ds, n);  // dP
    for (int64_t i = 0; i < n; ++i) {
      const int64_t lo = first_attended(s, i), len = i - lo + 1;
      float* row = ds + i * n;
      const float* prow = p + i * n;
      const float row_dot = cpu::vec_dot(prow + lo, row + lo, len);
      std::fill(row, row + lo, 0.0f);
      for (int64_t j = lo; j <= i; ++j) row[j] = prow[j] * (row[j] - row_dot) * scale;
      std::fill(row + i + 1, row + n, 0.0f);
    }
    // dQ_h (overwritten).
    times_transposed(w.kt, d, n, ds, w.out_t);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t x = 0; x < d; ++x) dq[i * s.ldq + head * d + x] = w.out_t[static_cast<size_t>(x * n + i)];
    // dKᵀ += Q_hᵀ (dSᵀ)ᵀ and dVᵀ += dO_hᵀ (Pᵀ)ᵀ.
    transpose(qh, n, d, s.ldq, w.rhs_t);
    transpose(ds, n, n, n, w.square_t);
    times_transposed(w.rhs_t, d, n, w.square_t.data(), w.out_t);
    cpu::add_inplace(w.dk_t.data(), w.out_t.data(), d * n);
    transpose(doh, n, d, s.ldo, w.rhs_t);
    transpose(p, n, n, n, w.square_t);
    times_transposed(w.rhs_t, d, n, w.square_t.data(), w.out_t);
    cpu::add_inplace(w.dv_t.data(), w.out_t.data(), d * n);
  }
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t x = 0; x < d; ++x) {
      dk[j * s.ldk + kv_head * d + x] += w.dk_t[static_cast<size_t>(x * n + j)];
      dv[j * s.ldv + kv_head * d + x] += w.dv_t[static_cast<size_t>(x * n + j)];
    }
  }
}

}  // namespace loragate::train
