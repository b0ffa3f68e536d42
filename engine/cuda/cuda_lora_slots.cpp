#include "engine/cuda/cuda_lora_slots.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/cuda/device_select.h"

namespace loragate {

CudaLoraSlots::CudaLoraSlots(const ModelConfig& base, int32_t num_slots, int32_t max_rank, int device,
                             std::shared_ptr<const cuda::Stream> stream)
    : num_slots_(num_slots),
      max_rank_(max_rank),
      device_(device),
      stream_(std::move(stream)),
      layers_(static_cast<size_t>(base.num_hidden_layers)) {
  status_ = allocate(base);
}

CudaLoraSlots::~CudaLoraSlots() {
  // The pinned image may still be the source of queued copies.
  if (copied_.get() != nullptr) (void)copied_.synchronize();
}

Status CudaLoraSlots::allocate(const ModelConfig& base) {
  if (num_slots_ < 0 || max_rank_ < 0) {
    return Status::invalid_argument("adapter slots: " + std::to_string(num_slots_) + " slots of rank " +
                                    std::to_string(max_rank_));
  }
  LG_RETURN_IF_ERROR(cuda::set_device(device_));
  const auto slots = static_cast<size_t>(num_slots_);
  const auto rank = static_cast<size_t>(max_rank_);
  size_t image = 0;  // floats of one slot's A and Bᵀ across all projections
  // cudaMalloc(0) gives no pointer the kernels' null checks would accept.
  const auto alloc = [](size_t bytes) { return cuda::DeviceBuffer::allocate(std::max<size_t>(bytes, 4)); };
  for (auto& layer : layers_) {
    for (LoraModule m : kAllLoraModules) {
      Projection& p = layer[lora_module_index(m)];
      p.in = in_features(m, base);
      p.out = out_features(m, base);
      const auto in = static_cast<size_t>(p.in), out = static_cast<size_t>(p.out);
      LG_ASSIGN_OR_RETURN(p.a, alloc(slots * rank * in * sizeof(float)));
      LG_ASSIGN_OR_RETURN(p.b_t, alloc(slots * rank * out * sizeof(float)));
      LG_ASSIGN_OR_RETURN(p.ranks, alloc(slots * sizeof(int32_t)));
      LG_ASSIGN_OR_RETURN(p.scalings, alloc(slots * sizeof(float)));
      p.staging_a = image;
      p.staging_b_t = image + rank * in;
      image += rank * (in + out);
    }
  }
  staging_meta_ = image;
  const size_t projections = layers_.size() * kLoraModuleCount;
  LG_ASSIGN_OR_RETURN(staging_, cuda::HostPinnedBuffer::allocate((image + 2 * projections) * sizeof(float)));
  LG_ASSIGN_OR_RETURN(copied_, cuda::Event::create());
  // Every slot starts empty: rank 0 everywhere (the device memory is not zeroed).
  for (int32_t s = 0; s < num_slots_; ++s) LG_RETURN_IF_ERROR(upload(s, nullptr));
  return Status::ok();
}

Status CudaLoraSlots::check_slot(int32_t slot) const {
  if (slot >= 0 && slot < num_slots_) return Status::ok();
  return Status::invalid_argument("adapter slot " + std::to_string(slot) + " outside [0, " +
                                  std::to_string(num_slots_) + ")");
}

void CudaLoraSlots::set(int32_t slot, const LoraAdapter& adapter) {
  if (!status_.is_ok()) return;
  status_ = check_slot(slot);
  if (status_.is_ok()) status_ = upload(slot, &adapter);
}

void CudaLoraSlots::reset(int32_t slot) {
  if (!status_.is_ok()) return;
  status_ = check_slot(slot);
  if (status_.is_ok()) status_ = upload(slot, nullptr);
}

Status CudaLoraSlots::upload(int32_t slot, const LoraAdapter* adapter) {
  LG_RETURN_IF_ERROR(cuda::set_device(device_));
  // The previous image must have left the pinned buffer before it is rewritten.
  LG_RETURN_IF_ERROR(copied_.synchronize());
  float* image = static_cast<float*>(staging_.get());
  float* meta = image + staging_meta_;
  const size_t projections = layers_.size() * kLoraModuleCount;
  void* stream = stream_->get();
  size_t index = 0;
  for (int64_t l = 0; l < static_cast<int64_t>(layers_.size()); ++l) {
    for (LoraModule m : kAllLoraModules) {
      Projection& p = at(l, m);
      const LoraWeights* w = adapter != nullptr ? adapter->weights(l, m) : nullptr;
      // Clamped to the slot size, as the CPU slots do.
      const int64_t rank = w != nullptr ? std::min<int64_t>(w->rank, max_rank_) : 0;
      // The rank is an int32 in a float-sized field (memcpy: no type punning).
      float* rank_field = meta + index;
      float* scaling_field = meta + projections + index;
      const auto rank32 = static_cast<int32_t>(rank);
      std::memcpy(rank_field, &rank32, sizeof rank32);
      *scaling_field = rank > 0 ? w->scaling : 0.0f;
      if (rank > 0) {
        float* a = image + p.staging_a;
        float* b_t = image + p.staging_b_t;
        std::copy(w->a.begin(), w->a.begin() + rank * p.in, a);
        // B is [out, rank]; the slot keeps it transposed so expand streams rows of `out`.
        for (int64_t o = 0; o < p.out; ++o) {
          for (int64_t r = 0; r < rank; ++r) b_t[r * p.out + o] = w->b[o * w->rank + r];
        }
        const size_t slot_a = static_cast<size_t>(slot) * max_rank_ * p.in;
        const size_t slot_b_t = static_cast<size_t>(slot) * max_rank_ * p.out;
        LG_RETURN_IF_ERROR(cuda::copy_to_device_async(static_cast<float*>(p.a.get()) + slot_a, a,
                                                      static_cast<size_t>(rank * p.in) * sizeof(float), stream));
        LG_RETURN_IF_ERROR(cuda::copy_to_device_async(static_cast<float*>(p.b_t.get()) + slot_b_t, b_t,
                                                      static_cast<size_t>(rank * p.out) * sizeof(float), stream));
      }
      LG_RETURN_IF_ERROR(cuda::copy_to_device_async(static_cast<float*>(p.scalings.get()) + slot, scaling_field,
                                                    sizeof(float), stream));
      LG_RETURN_IF_ERROR(cuda::copy_to_device_async(static_cast<int32_t*>(p.ranks.get()) + slot, rank_field,
                                                    sizeof(int32_t), stream));
      ++index;
    }
  }
  return copied_.record(stream);
}

cuda::LoraSlotsDevice CudaLoraSlots::weights(int64_t layer, LoraModule module) const {
  const Projection& p = at(layer, module);
  return {static_cast<const float*>(p.a.get()),
          static_cast<const float*>(p.b_t.get()),
          static_cast<const int32_t*>(p.ranks.get()),
          static_cast<const float*>(p.scalings.get()),
          num_slots_,
          p.in,
          p.out,
          max_rank_};
}

size_t CudaLoraSlots::bytes() const {
  size_t total = 0;
  for (const auto& layer : layers_) {
    for (const Projection& p : layer) total += p.a.bytes() + p.b_t.bytes() + p.ranks.bytes() + p.scalings.bytes();
  }
  return total;
}

}  // namespace loragate
