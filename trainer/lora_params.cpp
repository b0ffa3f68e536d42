// Lead's placeholder for the model tests; replaced by h-optim's implementation at merge.
#include "trainer/lora_params.h"

#include <algorithm>
#include <cmath>

namespace loragate::train {

Result<LoraParams> LoraParams::init(const ModelConfig& base, const LoraRecipe& recipe, uint64_t seed) {
  LoraParams out;
  out.recipe_ = recipe;
  out.scaling_ = recipe.scaling();
  out.index_.assign(static_cast<size_t>(base.num_hidden_layers * kLoraModuleCount), -1);
  uint64_t state = seed;
  auto next = [&] {
    state += 0x9e3779b97f4a7c15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return static_cast<double>((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
  };
  for (int64_t l = 0; l < base.num_hidden_layers; ++l) {
    if (!recipe.layers.empty() && std::find(recipe.layers.begin(), recipe.layers.end(), l) == recipe.layers.end())
      continue;
    for (LoraModule m : kAllLoraModules) {
      if (std::find(recipe.targets.begin(), recipe.targets.end(), m) == recipe.targets.end()) continue;
      LoraParam p;
      p.layer = l;
      p.module = m;
      p.in = in_features(m, base);
      p.out = out_features(m, base);
      p.rank = recipe.rank;
      const double bound = 1.0 / std::sqrt(static_cast<double>(p.in));
      p.a.resize(static_cast<size_t>(p.rank * p.in));
      for (float& x : p.a) x = static_cast<float>((2 * next() - 1) * bound);
      p.b.assign(static_cast<size_t>(p.out * p.rank), 0.0f);
      p.grad_a.assign(p.a.size(), 0.0f);
      p.grad_b.assign(p.b.size(), 0.0f);
      out.index_[static_cast<size_t>(l * kLoraModuleCount + lora_module_index(m))] =
          static_cast<int64_t>(out.params_.size());
      out.params_.push_back(std::move(p));
    }
  }
  return out;
}

LoraParam* LoraParams::find(int64_t layer, LoraModule module) {
  const size_t i = static_cast<size_t>(layer * kLoraModuleCount + lora_module_index(module));
  return i < index_.size() && index_[i] >= 0 ? &params_[static_cast<size_t>(index_[i])] : nullptr;
}
const LoraParam* LoraParams::find(int64_t layer, LoraModule module) const {
  return const_cast<LoraParams*>(this)->find(layer, module);
}

void LoraParams::zero_grad() {
  for (LoraParam& p : params_) {
    std::fill(p.grad_a.begin(), p.grad_a.end(), 0.0f);
    std::fill(p.grad_b.begin(), p.grad_b.end(), 0.0f);
  }
}

}  // namespace loragate::train
