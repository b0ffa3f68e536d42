// The attention tests' reference: dense softmax attention in double precision.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace loragate::cpu {

// Dense reference: softmax(q·K^T / sqrt(d)) · V over positions [first, last].
inline std::vector<double> reference_attention(const std::vector<float>& q, const std::vector<std::vector<float>>& k_tok,
                                        const std::vector<std::vector<float>>& v_tok, int64_t heads, int64_t kv_heads,
                                        int64_t d, int64_t first, int64_t last) {
  std::vector<double> out(heads * d, 0.0);
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t kvh = h / (heads / kv_heads);
    std::vector<double> s;
    for (int64_t p = first; p <= last; ++p) {
      double dot = 0;
      for (int64_t j = 0; j < d; ++j) dot += double(q[h * d + j]) * k_tok[p][kvh * d + j];
      s.push_back(dot / std::sqrt(double(d)));
    }
    const double m = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double& x : s) sum += (x = std::exp(x - m));
    for (int64_t p = first; p <= last; ++p) {
      for (int64_t j = 0; j < d; ++j) out[h * d + j] += s[p - first] / sum * v_tok[p][kvh * d + j];
    }
  }
  return out;
}

}  // namespace loragate::cpu
