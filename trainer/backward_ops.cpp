// Backward passes of RMSNorm, RoPE, SiLU·mul, causal GQA attention and
// cross-entropy; see backward_ops.h.
#include "trainer/backward_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace loragate::train {

template <typename T>
void rmsnorm_backward(const T* x, const float* w, const T* dy, T* dx, int64_t rows, int64_t dim, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * dim;
    const T* dyr = dy + r * dim;
    T* dxr = dx + r * dim;
    double sum_sq = 0, dot = 0;  // sum x^2, sum (w dy) x
    for (int64_t i = 0; i < dim; ++i) {
      sum_sq += static_cast<double>(xr[i]) * xr[i];
      dot += static_cast<double>(w[i]) * dyr[i] * xr[i];
    }
    const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps);
    // d/dx_i of x_j * inv * w_j: inv * w_i * dy_i - x_i * inv^3 / dim * sum_j w_j dy_j x_j.
    const double c = inv * inv * inv / static_cast<double>(dim) * dot;
    for (int64_t i = 0; i < dim; ++i) dxr[i] = static_cast<T>(inv * w[i] * dyr[i] - c * xr[i]);
  }
}

template <typename T>
void rope_backward(T* d, int64_t rows, int64_t heads, int64_t head_dim, int64_t row_stride, const float* cos,
                   const float* sin) {
  const int64_t half = head_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const float* c = cos + r * half;
    const float* s = sin + r * half;
    for (int64_t h = 0; h < heads; ++h) {
      T* x = d + r * row_stride + h * head_dim;
      for (int64_t j = 0; j < half; ++j) {
        // Forward: (a, b) -> (a c - b s, b c + a s); its transpose:
        const T da = x[j], db = x[j + half];
        x[j] = da * c[j] + db * s[j];
        x[j + half] = db * c[j] - da * s[j];
      }
    }
  }
}

template <typename T>
void silu_mul_backward(const T* gate_up, const T* d_out, T* d_gate_up, int64_t rows, int64_t inter) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* g = gate_up + r * 2 * inter;
    const T* u = g + inter;
    const T* dout = d_out + r * inter;
    T* dg = d_gate_up + r * 2 * inter;
    T* du = dg + inter;
    for (int64_t i = 0; i < inter; ++i) {
      const T sig = T(1) / (T(1) + std::exp(-g[i]));
      const T silu = g[i] * sig;
      du[i] = dout[i] * silu;
      dg[i] = dout[i] * u[i] * sig * (T(1) + g[i] * (T(1) - sig));
    }
  }
}

namespace {

// The first key position query i attends to.
int64_t first_key(const AttentionShape& s, int64_t i) { return s.window > 0 ? std::max<int64_t>(0, i - s.window + 1) : 0; }

// probs[i * n + j] = softmax_j(scale * q_i . k_j) over j in [first_key(i), i].
template <typename T>
void head_probs(const AttentionShape& s, int64_t head, const T* q, const T* k, T* probs) {
  const int64_t d = s.head_dim;
  const int64_t kv_head = head / (s.heads / s.kv_heads);
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  for (int64_t i = 0; i < s.n; ++i) {
    const T* qi = q + i * s.ldq + head * d;
    T* p = probs + i * s.n;
    const int64_t lo = first_key(s, i);
    T max = -std::numeric_limits<T>::infinity();
    for (int64_t j = lo; j <= i; ++j) {
      const T* kj = k + j * s.ldk + kv_head * d;
      T dot = 0;
      for (int64_t x = 0; x < d; ++x) dot += qi[x] * kj[x];
      p[j] = dot * scale;
      max = std::max(max, p[j]);
    }
    T sum = 0;
    for (int64_t j = lo; j <= i; ++j) sum += (p[j] = std::exp(p[j] - max));
    for (int64_t j = lo; j <= i; ++j) p[j] /= sum;
  }
}

}  // namespace

template <typename T>
void attention_head_forward(const AttentionShape& s, int64_t head, const T* q, const T* k, const T* v, T* out,
                            T* probs) {
  const int64_t d = s.head_dim;
  const int64_t kv_head = head / (s.heads / s.kv_heads);
  head_probs(s, head, q, k, probs);
  for (int64_t i = 0; i < s.n; ++i) {
    T* oi = out + i * s.ldo + head * d;
    std::fill(oi, oi + d, T(0));
    const T* p = probs + i * s.n;
    for (int64_t j = first_key(s, i); j <= i; ++j) {
      const T* vj = v + j * s.ldv + kv_head * d;
      for (int64_t x = 0; x < d; ++x) oi[x] += p[j] * vj[x];
    }
  }
}

template <typename T>
void attention_head_backward(const AttentionShape& s, int64_t head, const T* q, const T* k, const T* v,
                             const T* d_out, T* dq, T* dk, T* dv, T* probs, T* dprobs) {
  const int64_t d = s.head_dim;
  const int64_t kv_head = head / (s.heads / s.kv_heads);
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  head_probs(s, head, q, k, probs);
  for (int64_t i = 0; i < s.n; ++i) {
    const T* doi = d_out + i * s.ldo + head * d;
    const T* p = probs + i * s.n;
    T* dp = dprobs + i * s.n;
    const int64_t lo = first_key(s, i);
    // dP_ij = dO_i . v_j;  dV_j += P_ij dO_i.
    T row_dot = 0;  // sum_j P_ij dP_ij
    for (int64_t j = lo; j <= i; ++j) {
      const T* vj = v + j * s.ldv + kv_head * d;
      T* dvj = dv + j * s.ldv + kv_head * d;
      T dot = 0;
      for (int64_t x = 0; x < d; ++x) {
        dot += doi[x] * vj[x];
        dvj[x] += p[j] * doi[x];
      }
      dp[j] = dot;
      row_dot += p[j] * dot;
    }
    // dS_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij'); dQ_i = scale sum_j dS_ij k_j; dK_j += scale dS_ij q_i.
    const T* qi = q + i * s.ldq + head * d;
    T* dqi = dq + i * s.ldq + head * d;
    std::fill(dqi, dqi + d, T(0));
    for (int64_t j = lo; j <= i; ++j) {
      const T ds = p[j] * (dp[j] - row_dot) * scale;
      const T* kj = k + j * s.ldk + kv_head * d;
      T* dkj = dk + j * s.ldk + kv_head * d;
      for (int64_t x = 0; x < d; ++x) {
        dqi[x] += ds * kj[x];
        dkj[x] += ds * qi[x];
      }
    }
  }
}

template <typename T>
double cross_entropy(const T* logits, int64_t vocab, int32_t target, float scale, T* d_logits) {
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < vocab; ++i) max = std::max(max, static_cast<double>(logits[i]));
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  const double lse = max + std::log(sum);
  if (d_logits != nullptr) {
    for (int64_t i = 0; i < vocab; ++i)
      d_logits[i] = static_cast<T>(scale * std::exp(static_cast<double>(logits[i]) - lse));
    d_logits[target] -= static_cast<T>(scale);
  }
  return lse - static_cast<double>(logits[target]);
}

#define LG_INSTANTIATE(T)                                                                                         \
  template void rmsnorm_backward<T>(const T*, const float*, const T*, T*, int64_t, int64_t, double);              \
  template void rope_backward<T>(T*, int64_t, int64_t, int64_t, int64_t, const float*, const float*);             \
  template void silu_mul_backward<T>(const T*, const T*, T*, int64_t, int64_t);                                   \
  template void attention_head_forward<T>(const AttentionShape&, int64_t, const T*, const T*, const T*, T*, T*);  \
  template void attention_head_backward<T>(const AttentionShape&, int64_t, const T*, const T*, const T*, const T*, \
                                           T*, T*, T*, T*, T*);                                                   \
  template double cross_entropy<T>(const T*, int64_t, int32_t, float, T*);
LG_INSTANTIATE(float)
LG_INSTANTIATE(double)
#undef LG_INSTANTIATE

}  // namespace loragate::train
