// CudaLoraSlots: the CUDA runner's adapter slots, in device memory — the
// layout of the CPU's LoraSlots (adapters/lora_slots.h) that the SGMV/BGMV
// kernels (kernels/cuda/sgmv.h) read: per (layer, projection), A as
// [slots][max_rank][in] and Bᵀ as [slots][max_rank][out] f32, plus each
// slot's rank and scaling.
//
// set() and reset() write a slot's host image into pinned memory and queue
// its copies on the runner's stream, so they are ordered with the forward
// passes on that stream without blocking the step thread. The interface
// returns nothing, so a failure (an allocation at creation, a copy) is kept
// and status() reports it; the runner's forward() refuses a store in error.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "adapters/lora_adapter.h"
#include "adapters/lora_module.h"
#include "adapters/lora_slot_store.h"
#include "common/status.h"
#include "model/model_config.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/cuda_stream.h"
#include "kernels/cuda/sgmv.h"

namespace loragate {

class CudaLoraSlots final : public LoraSlotStore {
 public:
  // Slots for `base` on device `device`, written through `stream` (shared
  // with the runner, so the store may outlive neither's stream).
  CudaLoraSlots(const ModelConfig& base, int32_t num_slots, int32_t max_rank, int device,
                std::shared_ptr<const cuda::Stream> stream);
  CudaLoraSlots(const CudaLoraSlots&) = delete;
  CudaLoraSlots& operator=(const CudaLoraSlots&) = delete;
  ~CudaLoraSlots() override;

  int32_t num_slots() const override { return num_slots_; }
  int32_t max_rank() const override { return max_rank_; }
  void set(int32_t slot, const LoraAdapter& adapter) override;
  void reset(int32_t slot) override;
  size_t bytes() const override;

  // The first error of creation or of a set()/reset(); ok while all went well.
  const Status& status() const { return status_; }
  // The kernels' view of (layer, module) across all slots.
  cuda::LoraSlotsDevice weights(int64_t layer, LoraModule module) const;

 private:
  struct Projection {
    int64_t in = 0, out = 0;
    cuda::DeviceBuffer a, b_t;          // [slots][max_rank][in], [slots][max_rank][out]
    cuda::DeviceBuffer ranks, scalings;  // [slots] int32, [slots] f32
    size_t staging_a = 0, staging_b_t = 0;  // float offsets of this projection's image in staging_
  };
  Projection& at(int64_t layer, LoraModule m) { return layers_[layer][lora_module_index(m)]; }
  const Projection& at(int64_t layer, LoraModule m) const { return layers_[layer][lora_module_index(m)]; }

  Status allocate(const ModelConfig& base);
  Status upload(int32_t slot, const LoraAdapter* adapter);  // nullptr = reset
  Status check_slot(int32_t slot) const;

  int32_t num_slots_;
  int32_t max_rank_;
  int device_;
  std::shared_ptr<const cuda::Stream> stream_;
  std::vector<std::array<Projection, kLoraModuleCount>> layers_;
  // One slot's image: every projection's A and Bᵀ rows, then a rank and a
  // scaling per projection (4 bytes each). Rewritten only after `copied_`,
  // recorded behind the last copies from it, has passed.
  cuda::HostPinnedBuffer staging_;
  size_t staging_meta_ = 0;  // float offset of the ranks, then the scalings
  cuda::Event copied_;
  Status status_;
};

}  // namespace loragate
