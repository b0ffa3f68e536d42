// LoraSlotStore: where one engine's preallocated adapter slots live — host
// memory for the CPU runner (LoraSlots), device memory for a GPU runner.
// The AdapterCache writes adapters in and out through it, on the engine's
// step thread, between forward passes; the runner that made the store reads
// it during them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "adapters/lora_adapter.h"

namespace loragate {

class LoraSlotStore {
 public:
  virtual ~LoraSlotStore() = default;
  virtual int32_t num_slots() const = 0;
  virtual int32_t max_rank() const = 0;
  // Copies `adapter` into `slot` (its ranks must be <= max_rank()).
  virtual void set(int32_t slot, const LoraAdapter& adapter) = 0;
  // Makes `slot` a no-op everywhere.
  virtual void reset(int32_t slot) = 0;
  // Memory held by all slot buffers.
  virtual size_t bytes() const = 0;
};

}  // namespace loragate
