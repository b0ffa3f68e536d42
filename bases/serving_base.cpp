#include "bases/serving_base.h"

#include "model/model_dir.h"

namespace loragate {

Result<std::shared_ptr<ServingBase>> ServingBase::load(const BaseSpec& spec, const EngineOptions& options,
                                                       std::shared_ptr<ComputeGate> gate, bool serving) {
  EngineOptions o = options;
  o.weight_dtype = spec.dtype;
  LG_ASSIGN_OR_RETURN(std::shared_ptr<const ModelDir> model, ModelDir::open(spec.path));
  std::string sha = model->sha256();
  ChatTemplate tmpl = model->chat_template();
  LG_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::load(std::move(model), o));
  if (engine->adapters() == nullptr) return Status::invalid_argument("engine.max_loras must be > 0 to serve adapters");
  auto loop = std::make_unique<EngineLoop>(std::move(engine), std::move(gate), serving);
  return std::shared_ptr<ServingBase>(new ServingBase(spec, std::move(sha), std::move(loop), std::move(tmpl)));
}

int64_t ServingBase::memory_bytes() const {
  const MemoryEstimate m = measure_engine_memory(engine());
  return m.total() + adapters()->stats().host_bytes;
}

}  // namespace loragate
