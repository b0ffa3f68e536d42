#include "bases/serving_base.h"

namespace loragate {

Result<std::shared_ptr<ServingBase>> ServingBase::load(const BaseSpec& spec, const EngineOptions& options,
                                                       std::shared_ptr<ComputeGate> gate, bool serving) {
  EngineOptions o = options;
  o.weight_dtype = spec.dtype;
  if (o.max_loras <= 0) return Status::invalid_argument("engine.max_loras must be > 0 to serve adapters");
  LG_ASSIGN_OR_RETURN(std::shared_ptr<const ModelDir> model, ModelDir::open(spec.path));
  std::string sha = model->sha256();
  LG_ASSIGN_OR_RETURN(std::unique_ptr<EngineLoop> loop, EngineLoop::start(std::move(model), o, std::move(gate), serving));
  return std::shared_ptr<ServingBase>(new ServingBase(spec, std::move(sha), std::move(loop)));
}

int64_t ServingBase::memory_bytes() const {
  return loop_->memory().total() + adapters()->stats().host_bytes;
}

}  // namespace loragate
