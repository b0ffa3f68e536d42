// FailingRunner: a real model runner whose forward passes start failing on
// demand (the failure injection of the engine-failure tests). It wraps the
// runner load_model_runner makes and delegates everything else to it.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "engine/engine.h"

namespace loragate::testing {

// Shared by the test and the runners it made: forward() calls before the failures start.
struct RunnerFaults {
  std::atomic<int64_t> forwards_before_failing{1 << 30};
  std::atomic<int64_t> forwards{0};
};

class FailingRunner : public ModelRunner {
 public:
  FailingRunner(std::unique_ptr<ModelRunner> inner, std::shared_ptr<RunnerFaults> faults)
      : inner_(std::move(inner)), faults_(std::move(faults)) {}

  Device device() const override { return inner_->device(); }
  const ModelConfig& config() const override { return inner_->config(); }
  KvGeometry kv_geometry() const override { return inner_->kv_geometry(); }
  size_t weights_bytes() const override { return inner_->weights_bytes(); }
  std::unique_ptr<LoraSlotStore> make_lora_slots(int32_t num_slots, int32_t max_rank) const override {
    return inner_->make_lora_slots(num_slots, max_rank);
  }
  Status forward(const ForwardBatch& batch, const LoraSlotStore* lora, float* logits) override {
    if (faults_->forwards++ >= faults_->forwards_before_failing) {
      return Status::io_error("device upload failed: an illegal memory access was encountered (injected)");
    }
    return inner_->forward(batch, lora, logits);
  }

 private:
  std::unique_ptr<ModelRunner> inner_;
  std::shared_ptr<RunnerFaults> faults_;
};

// EngineOptions::runner_factory that wraps every runner it loads in a FailingRunner.
inline auto failing_runner_factory(std::shared_ptr<RunnerFaults> faults) {
  return [faults](const ModelDir& model, const RunnerOptions& options) -> Result<std::unique_ptr<ModelRunner>> {
    LG_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> inner, load_model_runner(model, options));
    return std::unique_ptr<ModelRunner>(std::make_unique<FailingRunner>(std::move(inner), faults));
  };
}

}  // namespace loragate::testing
