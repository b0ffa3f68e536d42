// Warm start: an adapter trained before (the online adapter of a scenario,
// carried over to a candidate base) as the starting point of a run, in place
// of PEFT's initialisation (A random, B zero). Training then continues from
// what the adapter already does on the new base instead of from the base's
// own outputs: LoRASuite-style transfer-then-fine-tune.
//
// The adapter decides the LoRA shape: the run's rank, alpha, rsLoRA, targets
// and layers are the adapter's (recipe_of), so step 0 computes exactly what
// the adapter computes. Plain functions; the loaded adapter is immutable.
#pragma once

#include <memory>
#include <string>

#include "adapters/lora_adapter.h"
#include "common/status.h"
#include "model/model_config.h"
#include "trainer/lora_params.h"
#include "trainer/train_config.h"

namespace loragate::train {

struct WarmStart {
  std::shared_ptr<const LoraAdapter> adapter;
  LoraRecipe recipe;   // the adapter's shape as a recipe
  std::string path;    // the folder it was read from
  std::string sha256;  // of its adapter_model.safetensors
};

// Loads the PEFT folder `dir`, validated against `base` (every tensor's shape),
// and the recipe it implies. Refused, naming the module: modules of different
// ranks or scalings, or targets that are not the same modules in every
// targeted layer (a recipe targets modules x layers).
Result<WarmStart> load_warm_start(const std::string& dir, const ModelConfig& base);

// Copies the adapter's A and B into `params`, made by LoraParams::init from
// the same recipe (shapes are checked again; a mismatch is an internal error).
Status apply_warm_start(const LoraAdapter& adapter, LoraParams& params);

}  // namespace loragate::train
