#include "adapters/lora_slots.h"

#include <algorithm>

namespace loragate {

LoraSlots::LoraSlots(const ModelConfig& base, int32_t num_slots, int32_t max_rank)
    : num_slots_(num_slots), max_rank_(max_rank), layers_(static_cast<size_t>(base.num_hidden_layers)) {
  for (auto& layer : layers_) {
    for (LoraModule m : kAllLoraModules) {
      Projection& p = layer[lora_module_index(m)];
      p.in = in_features(m, base);
      p.out = out_features(m, base);
      p.a.assign(static_cast<size_t>(num_slots) * max_rank * p.in, 0.0f);
      p.b_t.assign(static_cast<size_t>(num_slots) * max_rank * p.out, 0.0f);
      p.ranks.assign(static_cast<size_t>(num_slots), 0);
      p.scalings.assign(static_cast<size_t>(num_slots), 0.0f);
    }
  }
}

void LoraSlots::set(int32_t slot, const LoraAdapter& adapter) {
  for (int64_t l = 0; l < static_cast<int64_t>(layers_.size()); ++l) {
    for (LoraModule m : kAllLoraModules) {
      Projection& p = at(l, m);
      const LoraWeights* w = adapter.weights(l, m);
      if (w == nullptr || w->rank == 0) {
        p.ranks[slot] = 0;
        continue;
      }
      const int64_t rank = std::min<int64_t>(w->rank, max_rank_);
      std::copy(w->a.begin(), w->a.begin() + rank * p.in, p.a.begin() + slot * max_rank_ * p.in);
      // B is [out, rank]; the slot keeps it transposed so expand streams rows of `out`.
      float* b_t = p.b_t.data() + slot * max_rank_ * p.out;
      for (int64_t o = 0; o < p.out; ++o) {
        for (int64_t r = 0; r < rank; ++r) b_t[r * p.out + o] = w->b[o * w->rank + r];
      }
      p.ranks[slot] = static_cast<int32_t>(rank);
      p.scalings[slot] = w->scaling;
    }
  }
}

void LoraSlots::reset(int32_t slot) {
  for (auto& layer : layers_) {
    for (Projection& p : layer) p.ranks[slot] = 0;
  }
}

cpu::LoraSlotWeights LoraSlots::weights(int64_t layer, LoraModule module) const {
  const Projection& p = at(layer, module);
  return {p.a.data(), p.b_t.data(), p.ranks.data(), p.scalings.data(), p.in, p.out, max_rank_};
}

size_t LoraSlots::bytes() const {
  size_t total = 0;
  for (const auto& layer : layers_) {
    for (const Projection& p : layer) total += (p.a.size() + p.b_t.size()) * sizeof(float);
  }
  return total;
}

}  // namespace loragate
