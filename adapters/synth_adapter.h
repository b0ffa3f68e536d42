// Writes seeded random PEFT LoRA adapters (adapter_config.json +
// adapter_model.safetensors) for a base model, for tests and benchmarks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "adapters/lora_module.h"
#include "common/status.h"
#include "model/model_config.h"

namespace loragate {

struct SynthAdapterOptions {
  int64_t rank = 16;
  double lora_alpha = 32;
  std::vector<LoraModule> targets = {kAllLoraModules.begin(), kAllLoraModules.end()};
  uint64_t seed = 0;
  // A ~ N(0, 1/in), B ~ N(0, b_std²): big enough to change greedy outputs, small
  // enough to keep the model sane.
  double b_std = 0.02;
};

// Writes the adapter into `out_dir` (created if needed). Same options, same bytes.
Status write_synth_adapter(const std::string& out_dir, const ModelConfig& base, const SynthAdapterOptions& options);

}  // namespace loragate
