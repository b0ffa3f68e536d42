#include "engine/cpu_model_runner.h"

#include "adapters/lora_slots.h"

namespace loragate {

Result<std::unique_ptr<CpuModelRunner>> CpuModelRunner::load(const ModelDir& dir, const RunnerOptions& options) {
  LG_ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model,
                      LlamaModel::load(dir, options.weight_dtype, options.merge, options.outlier_threshold));
  LG_ASSIGN_OR_RETURN(KvCache cache, KvCache::create(model->config(), options.kv_block_size, options.kv_num_blocks,
                                                     options.kv_cache_bytes));
  return std::unique_ptr<CpuModelRunner>(new CpuModelRunner(std::move(model), std::move(cache)));
}

KvGeometry CpuModelRunner::kv_geometry() const {
  return {cache_.num_blocks(), cache_.block_size(), KvCache::bytes_per_block(config(), cache_.block_size())};
}

std::unique_ptr<LoraSlotStore> CpuModelRunner::make_lora_slots(int32_t num_slots, int32_t max_rank) const {
  return std::make_unique<LoraSlots>(config(), num_slots, max_rank);
}

Status CpuModelRunner::forward(const ForwardBatch& batch, const LoraSlotStore* lora, float* logits) {
  const auto* slots = dynamic_cast<const LoraSlots*>(lora);
  if (lora != nullptr && slots == nullptr) {
    return Status::internal("the CPU runner was given adapter slots another runner made");
  }
  return model_->forward(batch, cache_, workspace_, logits, slots);
}

}  // namespace loragate
