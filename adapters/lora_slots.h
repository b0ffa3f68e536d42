// LoraSlots: the preallocated adapter slots of the CPU runner, in host memory.
//
// For every (layer, projection) there is one stacked buffer per LoRA factor
// holding all slots ([slots][max_rank][in] for A, [slots][max_rank][out] for
// Bᵀ), sized once at start-up: set() copies an adapter in, reset() clears a
// slot; nothing is allocated afterwards. A slot whose adapter leaves a
// projection alone has rank 0 there. Owned by the engine's step thread (set
// and reset must not race with a forward pass).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "adapters/lora_adapter.h"
#include "adapters/lora_module.h"
#include "adapters/lora_slot_store.h"
#include "model/model_config.h"
#include "kernels/cpu/lora.h"

namespace loragate {

class LoraSlots final : public LoraSlotStore {
 public:
  LoraSlots(const ModelConfig& base, int32_t num_slots, int32_t max_rank);
  LoraSlots(const LoraSlots&) = delete;
  LoraSlots& operator=(const LoraSlots&) = delete;

  int32_t num_slots() const override { return num_slots_; }
  int32_t max_rank() const override { return max_rank_; }
  void set(int32_t slot, const LoraAdapter& adapter) override;
  void reset(int32_t slot) override;
  size_t bytes() const override;
  // The kernel's view of (layer, module) across all slots.
  cpu::LoraSlotWeights weights(int64_t layer, LoraModule module) const;

 private:
  struct Projection {
    int64_t in = 0, out = 0;
    std::vector<float> a, b_t;       // [slots][max_rank][in], [slots][max_rank][out]
    std::vector<int32_t> ranks;      // [slots]
    std::vector<float> scalings;     // [slots]
  };
  Projection& at(int64_t layer, LoraModule m) { return layers_[layer][lora_module_index(m)]; }
  const Projection& at(int64_t layer, LoraModule m) const { return layers_[layer][lora_module_index(m)]; }

  int32_t num_slots_;
  int32_t max_rank_;
  std::vector<std::array<Projection, kLoraModuleCount>> layers_;
};

}  // namespace loragate
