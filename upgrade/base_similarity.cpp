#include "upgrade/base_similarity.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/dtype.h"

namespace loragate::eval {
namespace {

// "model.layers.3.self_attn.q_proj.weight" -> "q_proj"; "lm_head.weight" -> "lm_head".
std::string module_of(const std::string& name) {
  const std::string stem = name.substr(0, name.size() - std::string(".weight").size());
  const size_t dot = stem.rfind('.');
  return dot == std::string::npos ? stem : stem.substr(dot + 1);
}

bool is_float(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

struct Sums {
  double aa = 0, bb = 0, ab = 0;  // ||A||^2, ||B||^2, <A, B>
};

// The three sums of two tensors of the same shape, converted to f32 a chunk at a time.
Sums sums_of(const TensorView& a, const TensorView& b) {
  constexpr size_t kChunk = size_t{1} << 16;
  std::vector<float> x(kChunk), y(kChunk);
  const size_t n = static_cast<size_t>(a.numel());
  const size_t ea = dtype_size(a.dtype), eb = dtype_size(b.dtype);
  Sums s;
  for (size_t at = 0; at < n; at += kChunk) {
    const size_t k = std::min(kChunk, n - at);
    convert_to_f32(a.dtype, a.data + at * ea, x.data(), k);
    convert_to_f32(b.dtype, b.data + at * eb, y.data(), k);
    for (size_t i = 0; i < k; ++i) {
      s.aa += static_cast<double>(x[i]) * x[i];
      s.bb += static_cast<double>(y[i]) * y[i];
      s.ab += static_cast<double>(x[i]) * y[i];
    }
  }
  return s;
}

}  // namespace

BaseSimilarity compare_bases(const WeightStore& a, const WeightStore& b) {
  BaseSimilarity out;
  std::map<std::string, size_t> index;  // module -> out.modules position
  Sums total;
  for (const std::string& name : a.names()) {
    if (name.size() <= 7 || name.compare(name.size() - 7, 7, ".weight") != 0) continue;
    const TensorView* ta = a.find(name);
    const TensorView* tb = b.find(name);
    if (ta == nullptr || tb == nullptr || ta->shape != tb->shape || ta->shape.size() != 2) continue;
    if (!is_float(ta->dtype) || !is_float(tb->dtype)) continue;
    const Sums s = sums_of(*ta, *tb);
    total.aa += s.aa;
    total.bb += s.bb;
    total.ab += s.ab;
    const double rel = s.aa > 0 ? std::sqrt(std::max(0.0, s.aa + s.bb - 2 * s.ab) / s.aa) : 0.0;
    const double cosine = s.aa > 0 && s.bb > 0 ? s.ab / std::sqrt(s.aa * s.bb) : 0.0;
    const std::string module = module_of(name);
    auto [it, fresh] = index.emplace(module, out.modules.size());
    if (fresh) out.modules.push_back({module, 0, 0, 0, 0, 1});
    ModuleSimilarity& m = out.modules[it->second];
    m.rel_frobenius_mean += rel;  // a sum until the end
    m.cosine_mean += cosine;
    m.rel_frobenius_max = std::max(m.rel_frobenius_max, rel);
    m.cosine_min = std::min(m.cosine_min, cosine);
    ++m.tensors;
  }
  for (ModuleSimilarity& m : out.modules) {
    m.rel_frobenius_mean /= static_cast<double>(m.tensors);
    m.cosine_mean /= static_cast<double>(m.tensors);
  }
  if (out.modules.empty()) {
    out.unavailable = "no float weight of the same name and shape in both bases (quantised files, or another "
                      "architecture)";
  } else if (total.aa > 0) {
    out.rel_frobenius = std::sqrt(std::max(0.0, total.aa + total.bb - 2 * total.ab) / total.aa);
  }
  return out;
}

nlohmann::json similarity_json(const BaseSimilarity& s) {
  if (!s.unavailable.empty()) return {{"unavailable", s.unavailable}};
  nlohmann::json modules = nlohmann::json::array();
  for (const ModuleSimilarity& m : s.modules) {
    modules.push_back({{"module", m.module},
                       {"tensors", m.tensors},
                       {"rel_frobenius_mean", m.rel_frobenius_mean},
                       {"rel_frobenius_max", m.rel_frobenius_max},
                       {"cosine_mean", m.cosine_mean},
                       {"cosine_min", m.cosine_min}});
  }
  return {{"rel_frobenius", s.rel_frobenius}, {"modules", modules}};
}

}  // namespace loragate::eval
