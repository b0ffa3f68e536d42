// Writing PEFT LoRA adapter folders: adapter_config.json and
// adapter_model.safetensors (f32), as PEFT's save_pretrained lays them out,
// so that PEFT and loragate load them as-is. Used by the synthetic adapters
// of tests and benchmarks and by the trainer.
//
// Free functions; reentrant.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "adapters/lora_module.h"
#include "common/status.h"

namespace loragate {

// What adapter_config.json says of the adapter.
struct PeftAdapterSpec {
  int64_t rank = 8;                          // "r"
  double lora_alpha = 16;
  bool use_rslora = false;                   // scaling alpha / sqrt(r) instead of alpha / r
  std::vector<LoraModule> targets;           // "target_modules", as PEFT names
  std::vector<int64_t> layers_to_transform;  // empty: every layer (the key is left out)
  std::string base_model_name_or_path;       // informational
};

// One f32 tensor of adapter_model.safetensors, e.g. lora_tensor_name(...) of shape [rank, in].
struct PeftTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::span<const float> values;  // row-major; must hold exactly shape's element count
};

// adapter_config.json's content for `spec` (peft_type LORA, task_type
// CAUSAL_LM, bias "none", lora_dropout 0).
nlohmann::json peft_adapter_config_json(const PeftAdapterSpec& spec);

// Writes adapter_model.safetensors (the tensors in the given order) and then
// adapter_config.json into `dir`, created if absent; each file atomically
// (temporary file, sync, rename). Refuses a rank < 1, no targets, or a tensor
// whose values do not match its shape, naming it.
Status write_peft_adapter(const std::string& dir, const PeftAdapterSpec& spec,
                          const std::vector<PeftTensor>& tensors);

}  // namespace loragate
