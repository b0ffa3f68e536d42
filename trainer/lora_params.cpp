// LoraParams: allocation, PEFT's default initialisation, lookup and PEFT output.
#include "trainer/lora_params.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "adapters/peft_writer.h"
#include "common/random.h"

namespace loragate::train {
namespace {

// The seed of one matrix: the run's seed mixed with the tensor's PEFT name,
// so a (layer, module) gets the same A whatever else the recipe targets.
uint64_t lora_init_seed(uint64_t seed, int64_t layer, LoraModule m) {
  uint64_t state = seed ^ fnv1a64(lora_tensor_name(layer, m, true));
  return splitmix64(state);
}

// The sorted, de-duplicated layers of `recipe`, or every layer of `base`.
Result<std::vector<int64_t>> lora_layers_of(const ModelConfig& base, const LoraRecipe& recipe) {
  std::vector<int64_t> layers = recipe.layers;
  if (layers.empty()) {
    for (int64_t l = 0; l < base.num_hidden_layers; ++l) layers.push_back(l);
    return layers;
  }
  std::sort(layers.begin(), layers.end());
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  for (int64_t l : layers) {
    if (l < 0 || l >= base.num_hidden_layers) {
      return Status::invalid_argument("lora.layers names layer " + std::to_string(l) + ", but the base has " +
                                      std::to_string(base.num_hidden_layers) + " layers (0.." +
                                      std::to_string(base.num_hidden_layers - 1) + ")");
    }
  }
  return layers;
}

}  // namespace

Result<LoraParams> LoraParams::init(const ModelConfig& base, const LoraRecipe& recipe, uint64_t seed) {
  if (recipe.rank < 1) return Status::invalid_argument("lora.rank must be at least 1, got " + std::to_string(recipe.rank));
  if (!(recipe.alpha > 0) || !std::isfinite(recipe.alpha)) return Status::invalid_argument("lora.alpha must be positive");
  if (recipe.targets.empty()) return Status::invalid_argument("lora.targets must name at least one module");
  std::array<bool, kLoraModuleCount> targeted{};
  for (LoraModule m : recipe.targets) {
    bool& seen = targeted[static_cast<size_t>(lora_module_index(m))];
    if (seen) return Status::invalid_argument("lora.targets names " + std::string(lora_module_name(m)) + " twice");
    seen = true;
  }
  if (base.num_hidden_layers < 1) return Status::invalid_argument("the base model has no layers");
  LG_ASSIGN_OR_RETURN(const std::vector<int64_t> layers, lora_layers_of(base, recipe));

  LoraParams p;
  p.recipe_ = recipe;
  p.scaling_ = recipe.scaling();
  p.index_.assign(static_cast<size_t>(base.num_hidden_layers * kLoraModuleCount), -1);
  for (int64_t layer : layers) {
    for (LoraModule m : kAllLoraModules) {
      if (!targeted[static_cast<size_t>(lora_module_index(m))]) continue;
      LoraParam q;
      q.layer = layer;
      q.module = m;
      q.in = in_features(m, base);
      q.out = out_features(m, base);
      q.rank = recipe.rank;
      if (q.in < 1 || q.out < 1) {
        return Status::invalid_argument("the base's " + lora_module_path(layer, m) + " has no width to adapt");
      }
      // PEFT: kaiming_uniform_(A, a=sqrt(5)) is U(-1/sqrt(in), 1/sqrt(in)); B = 0.
      const double bound = 1.0 / std::sqrt(static_cast<double>(q.in));
      Xoshiro256 rng(lora_init_seed(seed, layer, m));
      q.a.resize(static_cast<size_t>(q.rank * q.in));
      for (float& x : q.a) x = static_cast<float>(bound * (2.0 * rng.uniform() - 1.0));
      q.b.assign(static_cast<size_t>(q.out * q.rank), 0.0f);
      q.grad_a.assign(q.a.size(), 0.0f);
      q.grad_b.assign(q.b.size(), 0.0f);
      p.index_[static_cast<size_t>(layer * kLoraModuleCount + lora_module_index(m))] =
          static_cast<int64_t>(p.params_.size());
      p.params_.push_back(std::move(q));
    }
  }
  return p;
}

LoraParam* LoraParams::find(int64_t layer, LoraModule module) {
  return const_cast<LoraParam*>(std::as_const(*this).find(layer, module));
}

const LoraParam* LoraParams::find(int64_t layer, LoraModule module) const {
  if (layer < 0) return nullptr;
  const int64_t slot = layer * kLoraModuleCount + lora_module_index(module);
  if (slot >= static_cast<int64_t>(index_.size())) return nullptr;
  const int64_t i = index_[static_cast<size_t>(slot)];
  return i < 0 ? nullptr : &params_[static_cast<size_t>(i)];
}

void LoraParams::zero_grad() {
  for (LoraParam& p : params_) {
    std::fill(p.grad_a.begin(), p.grad_a.end(), 0.0f);
    std::fill(p.grad_b.begin(), p.grad_b.end(), 0.0f);
  }
}

int64_t LoraParams::num_parameters() const {
  int64_t n = 0;
  for (const LoraParam& p : params_) n += static_cast<int64_t>(p.a.size() + p.b.size());
  return n;
}

Status LoraParams::save_peft(const std::string& dir, const std::string& base_model_name_or_path) const {
  PeftAdapterSpec spec;
  spec.rank = recipe_.rank;
  spec.lora_alpha = recipe_.alpha;
  spec.use_rslora = recipe_.use_rslora;
  // In kAllLoraModules order, as the matrices are.
  for (LoraModule m : kAllLoraModules) {
    if (std::find(recipe_.targets.begin(), recipe_.targets.end(), m) != recipe_.targets.end()) {
      spec.targets.push_back(m);
    }
  }
  // layers_to_transform only when a subset of the base's layers is adapted.
  const int64_t num_layers = static_cast<int64_t>(index_.size()) / kLoraModuleCount;
  std::vector<int64_t> layers;
  for (const LoraParam& p : params_) {
    if (layers.empty() || layers.back() != p.layer) layers.push_back(p.layer);
  }
  if (static_cast<int64_t>(layers.size()) != num_layers) spec.layers_to_transform = layers;
  spec.base_model_name_or_path = base_model_name_or_path;

  std::vector<PeftTensor> tensors;
  tensors.reserve(2 * params_.size());
  for (const LoraParam& p : params_) {
    tensors.push_back({lora_tensor_name(p.layer, p.module, true), {p.rank, p.in}, p.a});
    tensors.push_back({lora_tensor_name(p.layer, p.module, false), {p.out, p.rank}, p.b});
  }
  return write_peft_adapter(dir, spec, tensors);
}

}  // namespace loragate::train
