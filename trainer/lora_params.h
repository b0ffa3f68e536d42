// LoraParams: the trainable LoRA matrices of one adapter being trained, in
// f32, with their gradients.
//
// One LoraParam per targeted (layer, module): a [rank, in] and b [out, rank]
// row-major, as PEFT stores lora_A / lora_B. init() follows PEFT's default
// initialisation: A Kaiming-uniform with a = sqrt(5), i.e. U(-1/sqrt(in),
// 1/sqrt(in)), B zero, so training starts from the base's own outputs.
// save_peft() writes a folder PEFT and loragate load as-is.
// Not thread-safe; owned by one training run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "adapters/lora_module.h"
#include "common/status.h"
#include "model/model_config.h"
#include "trainer/train_config.h"

namespace loragate::train {

struct LoraParam {
  int64_t layer = 0;
  LoraModule module = LoraModule::kQ;
  int64_t in = 0, out = 0, rank = 0;
  std::vector<float> a, b;            // [rank, in], [out, rank]
  std::vector<float> grad_a, grad_b;  // same shapes; accumulated by backward passes
};

class LoraParams {
 public:
  // Allocates every target of `recipe` for `base` (layers ascending, then
  // modules in kAllLoraModules order) and initialises A from `seed`, B = 0.
  // Refuses a recipe naming a layer the base lacks or a rank < 1.
  static Result<LoraParams> init(const ModelConfig& base, const LoraRecipe& recipe, uint64_t seed);

  float scaling() const { return scaling_; }
  const LoraRecipe& recipe() const { return recipe_; }
  std::vector<LoraParam>& params() { return params_; }
  const std::vector<LoraParam>& params() const { return params_; }
  // The parameter of (layer, module), or nullptr when not targeted.
  LoraParam* find(int64_t layer, LoraModule module);
  const LoraParam* find(int64_t layer, LoraModule module) const;

  void zero_grad();
  int64_t num_parameters() const;  // trainable scalars

  // Writes adapter_config.json (peft_type LORA, r, lora_alpha, use_rslora,
  // target_modules, layers_to_transform when not all, base_model_name_or_path)
  // and adapter_model.safetensors (f32, PEFT key names) into `dir`, created if
  // absent; each file atomically.
  Status save_peft(const std::string& dir, const std::string& base_model_name_or_path) const;

 private:
  LoraRecipe recipe_;
  float scaling_ = 0;
  std::vector<LoraParam> params_;
  std::vector<int64_t> index_;  // layer * kLoraModuleCount + module -> params_ index, or -1
};

}  // namespace loragate::train
