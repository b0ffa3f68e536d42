// CpuModelRunner: forward passes on the CPU kernels — LlamaModel over a
// host KvCache, with the adapters of host LoraSlots. What the engine ran
// before the ModelRunner seam, unchanged in output and speed.
#pragma once

#include <memory>
#include <string>

#include "engine/kv_cache.h"
#include "engine/llama_model.h"
#include "engine/model_runner.h"

namespace loragate {

class CpuModelRunner final : public ModelRunner {
 public:
  static Result<std::unique_ptr<CpuModelRunner>> load(const ModelDir& model, const RunnerOptions& options);

  Device device() const override { return Device{}; }
  const ModelConfig& config() const override { return model_->config(); }
  KvGeometry kv_geometry() const override;
  size_t weights_bytes() const override { return model_->weights().bytes(); }
  std::unique_ptr<LoraSlotStore> make_lora_slots(int32_t num_slots, int32_t max_rank) const override;
  Status forward(const ForwardBatch& batch, const LoraSlotStore* lora, float* logits) override;

  // The model itself, for CPU-only tools (benchmarks, logit comparisons).
  const LlamaModel& model() const { return *model_; }

 private:
  CpuModelRunner(std::unique_ptr<LlamaModel> model, KvCache cache) : model_(std::move(model)), cache_(std::move(cache)) {}

  std::unique_ptr<LlamaModel> model_;
  KvCache cache_;
  ForwardWorkspace workspace_;
};

// The CPU model behind `runner`, or nullptr when it runs elsewhere.
inline const LlamaModel* cpu_model(const ModelRunner& runner) {
  const auto* cpu = dynamic_cast<const CpuModelRunner*>(&runner);
  return cpu != nullptr ? &cpu->model() : nullptr;
}

}  // namespace loragate
