// The trainer's vectorised attention; see train_attention.h.
#include "trainer/train_attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/vec.h"

namespace loragate::train {
namespace {

// The first key position query i attends to.
int64_t first_attended(const AttentionShape& s, int64_t i) {
  return s.window > 0 ? std::max<int64_t>(0, i - s.window + 1) : 0;
}

// dst[x * n + j] = src[j * ld + x] for the head_dim columns of one KV head.
void transpose_head(const float* src, int64_t n, int64_t d, int64_t ld, std::vector<float>& dst) {
  dst.resize(static_cast<size_t>(d * n));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t x = 0; x < d; ++x) dst[static_cast<size_t>(x * n + j)] = src[j * ld + x];
}

// p[lo..i] = softmax_j(scale · q_i · k_j), from kt = Kᵀ [d, n]: the scores
// are d axpys along the keys.
void probs_row(const float* qi, const float* kt, int64_t n, int64_t d, float scale, int64_t lo, int64_t i, float* p) {
  const int64_t len = i - lo + 1;
  std::fill(p + lo, p + i + 1, 0.0f);
  for (int64_t x = 0; x < d; ++x) cpu::vec_axpy(qi[x] * scale, kt + x * n + lo, p + lo, len);
  const float inv = 1.0f / cpu::vec_softmax_numerators(p + lo, len);
  for (int64_t j = lo; j <= i; ++j) p[j] *= inv;
}

}  // namespace

void attention_group_forward(const AttentionShape& s, int64_t kv_head, const float* q, const float* k, const float* v,
                             float* out, AttentionScratch& w) {
  const int64_t n = s.n, d = s.head_dim, group = s.heads / s.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  transpose_head(k + kv_head * d, n, d, s.ldk, w.kt);
  transpose_head(v + kv_head * d, n, d, s.ldv, w.vt);
  w.p.resize(static_cast<size_t>(n));
  for (int64_t head = kv_head * group; head < (kv_head + 1) * group; ++head) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t lo = first_attended(s, i), len = i - lo + 1;
      probs_row(q + i * s.ldq + head * d, w.kt.data(), n, d, scale, lo, i, w.p.data());
      float* oi = out + i * s.ldo + head * d;
      for (int64_t x = 0; x < d; ++x) oi[x] = cpu::vec_dot(w.p.data() + lo, w.vt.data() + x * n + lo, len);
    }
  }
}

// Per query row i of each head, with P_i recomputed:
//   dP_ij = dO_i · v_j,  dS_ij = P_ij (dP_ij - Σ_j' P_ij' dP_ij') · scale,
//   dQ_i = Σ_j dS_ij k_j,  dK_j += dS_ij q_i,  dV_j += P_ij dO_i;
// dK and dV are gathered transposed ([d, n], along the keys) and added at the end.
void attention_group_backward(const AttentionShape& s, int64_t kv_head, const float* q, const float* k,
                              const float* v, const float* d_out, float* dq, float* dk, float* dv,
                              AttentionScratch& w) {
  const int64_t n = s.n, d = s.head_dim, group = s.heads / s.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  transpose_head(k + kv_head * d, n, d, s.ldk, w.kt);
  transpose_head(v + kv_head * d, n, d, s.ldv, w.vt);
  w.dkt.assign(static_cast<size_t>(d * n), 0.0f);
  w.dvt.assign(static_cast<size_t>(d * n), 0.0f);
  w.p.resize(static_cast<size_t>(n));
  w.dp.resize(static_cast<size_t>(n));
  float* p = w.p.data();
  float* dp = w.dp.data();
  for (int64_t head = kv_head * group; head < (kv_head + 1) * group; ++head) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t lo = first_attended(s, i), len = i - lo + 1;
      const float* qi = q + i * s.ldq + head * d;
      const float* doi = d_out + i * s.ldo + head * d;
      probs_row(qi, w.kt.data(), n, d, scale, lo, i, p);
      std::fill(dp + lo, dp + i + 1, 0.0f);
      for (int64_t x = 0; x < d; ++x) cpu::vec_axpy(doi[x], w.vt.data() + x * n + lo, dp + lo, len);
      const float row_dot = cpu::vec_dot(p + lo, dp + lo, len);
      for (int64_t j = lo; j <= i; ++j) dp[j] = p[j] * (dp[j] - row_dot) * scale;  // now dS_ij
      float* dqi = dq + i * s.ldq + head * d;
      for (int64_t x = 0; x < d; ++x) dqi[x] = cpu::vec_dot(dp + lo, w.kt.data() + x * n + lo, len);
      for (int64_t x = 0; x < d; ++x) cpu::vec_axpy(qi[x], dp + lo, w.dkt.data() + x * n + lo, len);
      for (int64_t x = 0; x < d; ++x) cpu::vec_axpy(doi[x], p + lo, w.dvt.data() + x * n + lo, len);
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    float* dkj = dk + j * s.ldk + kv_head * d;
    float* dvj = dv + j * s.ldv + kv_head * d;
    for (int64_t x = 0; x < d; ++x) {
      dkj[x] += w.dkt[static_cast<size_t>(x * n + j)];
      dvj[x] += w.dvt[static_cast<size_t>(x * n + j)];
    }
  }
}

}  // namespace loragate::train
