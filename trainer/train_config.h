// TrainConfig: everything that decides what `loragate train` produces — the
// LoRA recipe, the optimizer and schedule, the data order. Recorded beside
// every adapter it trains (training.json) and per scenario in the registry,
// so that an upgrade can retrain the same adapter on another base.
//
// Plain values; to_json/from_json round-trip every field, and from_json
// refuses unknown keys and out-of-range values naming the key.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "adapters/lora_module.h"
#include "common/status.h"

namespace loragate::train {

// What is adapted, as PEFT's LoraConfig names it.
struct LoraRecipe {
  int64_t rank = 8;
  double alpha = 16;
  bool use_rslora = false;  // scaling alpha / sqrt(rank) instead of alpha / rank
  std::vector<LoraModule> targets{kAllLoraModules.begin(), kAllLoraModules.end()};
  std::vector<int64_t> layers;  // layers_to_transform; empty: every layer

  float scaling() const;
};

enum class Schedule { kConstant, kCosine };

// AdamW (decoupled weight decay, PyTorch's torch.optim.AdamW semantics; with
// weight_decay 0 it is torch.optim.Adam), linear warm-up from 0 over
// warmup_steps, then constant or cosine decay to 0 at the last step.
struct OptimizerConfig {
  double lr = 2e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  int64_t warmup_steps = 0;
  Schedule schedule = Schedule::kConstant;
  double max_grad_norm = 0.0;  // global L2 clip over all LoRA gradients; 0: off
};

// How examples are drawn: with replacement (the fixtures' recipe: every step
// draws `batch` indices uniformly) or as seeded shuffled epochs.
enum class Sampling { kReplacement, kShuffle };

struct TrainConfig {
  LoraRecipe lora;
  OptimizerConfig optimizer;
  int64_t steps = 200;        // optimizer steps; when epochs > 0, derived from it
  double epochs = 0;          // > 0: steps = ceil(epochs * examples / (batch * grad_accum))
  int64_t batch = 16;         // examples per micro-batch
  int64_t grad_accum = 1;     // micro-batches per optimizer step
  uint64_t seed = 7000;       // LoRA init and data order
  Sampling sampling = Sampling::kReplacement;
  int64_t max_seq_len = 1024; // longer examples are refused when loaded (never cut silently)
  int64_t checkpoint_every = 50;  // optimizer steps between resumable checkpoints; 0: only at the end

  // The optimizer steps a run over `examples` examples makes.
  int64_t total_steps(int64_t examples) const;
};

// A module by its PEFT name ("q_proj") or short name ("q"); nullopt otherwise.
std::optional<LoraModule> parse_lora_target(std::string_view name);

nlohmann::json to_json(const TrainConfig& config);
// Refuses unknown keys, wrong types and out-of-range values, naming the key.
Result<TrainConfig> train_config_from_json(const nlohmann::json& j);

}  // namespace loragate::train
