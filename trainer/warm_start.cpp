#include "trainer/warm_start.h"

#include <cmath>
#include <optional>
#include <set>

namespace loragate::train {

Result<WarmStart> load_warm_start(const std::string& dir, const ModelConfig& base) {
  // Any rank the base can hold: the serving slots' limit is not the trainer's.
  LG_ASSIGN_OR_RETURN(std::shared_ptr<const LoraAdapter> adapter,
                      LoraAdapter::load(dir, base, /*max_rank=*/int64_t{1} << 20));
  const std::string who = "--init-from " + dir;
  std::set<int64_t> layers;
  std::set<LoraModule> modules;
  const LoraWeights* first = nullptr;
  for (int64_t l = 0; l < adapter->num_layers(); ++l) {
    for (LoraModule m : kAllLoraModules) {
      const LoraWeights* w = adapter->weights(l, m);
      if (w == nullptr) continue;
      layers.insert(l);
      modules.insert(m);
      if (first == nullptr) first = w;
      if (w->rank != first->rank || w->scaling != first->scaling) {
        return Status::unsupported(who + ": " + lora_module_path(l, m) + " has rank " + std::to_string(w->rank) +
                                   " and scaling " + std::to_string(w->scaling) + ", others rank " +
                                   std::to_string(first->rank) + " and scaling " + std::to_string(first->scaling) +
                                   ": a warm start needs one rank and scaling for every module");
      }
    }
  }
  if (first == nullptr) return Status::invalid_argument(who + ": the adapter targets no module of this base");
  for (int64_t l : layers) {
    for (LoraModule m : modules) {
      if (adapter->weights(l, m) == nullptr) {
        return Status::unsupported(who + ": " + lora_module_path(l, m) + " is not adapted while other layers' " +
                                   std::string(lora_module_name(m)) + " are: a warm start needs the same modules in every layer");
      }
    }
  }
  WarmStart out;
  out.recipe.rank = first->rank;
  out.recipe.use_rslora = adapter->config().use_rslora();
  const std::optional<LoraTarget> target = adapter->config().target(*layers.begin(), *modules.begin());
  const double r = static_cast<double>(first->rank);
  out.recipe.alpha = target ? target->alpha : static_cast<double>(first->scaling) * (out.recipe.use_rslora ? std::sqrt(r) : r);
  out.recipe.targets.assign(modules.begin(), modules.end());
  if (static_cast<int64_t>(layers.size()) != base.num_hidden_layers) out.recipe.layers.assign(layers.begin(), layers.end());
  out.path = adapter->path();
  out.sha256 = adapter->weights_sha256();
  out.adapter = std::move(adapter);
  return out;
}

Status apply_warm_start(const LoraAdapter& adapter, LoraParams& params) {
  for (LoraParam& p : params.params()) {
    const LoraWeights* w = adapter.weights(p.layer, p.module);
    if (w == nullptr || w->a.size() != p.a.size() || w->b.size() != p.b.size()) {
      return Status::internal("warm start: " + lora_module_path(p.layer, p.module) +
                              " differs between the adapter and the recipe made from it");
    }
    p.a = w->a;
    p.b = w->b;
  }
  return Status::ok();
}

}  // namespace loragate::train
