// ModelRunner: the seam between the engine (scheduling, sequences,
// sampling) and where its forward passes run. CpuModelRunner
// (engine/cpu_model_runner.h) runs them on the CPU kernels; a GPU runner
// would hold its weights, KV blocks and adapter slots in device memory
// behind the same interface. The engine owns one runner and calls it from
// its step thread only.
//
// What crosses the seam: a ForwardBatch (FlatBatch, engine/flat_batch.h,
// is the same batch as the flat arrays a device runner copies in one go),
// the adapter slot store the runner made and the AdapterCache writes
// through, and host memory for the logits rows the sampler reads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "adapters/lora_adapter.h"
#include "adapters/lora_slot_store.h"
#include "common/status.h"
#include "common/weight_type.h"
#include "engine/device.h"
#include "engine/forward_batch.h"
#include "model/model_config.h"
#include "model/model_dir.h"

namespace loragate {

// The KV pool a runner allocated: `num_blocks` blocks of `block_size` tokens.
struct KvGeometry {
  int32_t num_blocks = 0;
  int32_t block_size = 0;
  int64_t bytes_per_block = 0;  // across all layers, K and V
  int64_t bytes() const { return int64_t{num_blocks} * bytes_per_block; }
};

struct RunnerOptions {
  Device device;
  WeightType weight_dtype = WeightType::kF32;
  float outlier_threshold = kDefaultOutlierThreshold;
  int32_t kv_block_size = 16;
  int32_t kv_num_blocks = 0;          // 0 = as many as kv_cache_bytes holds
  int64_t kv_cache_bytes = 256ll << 20;
  const LoraAdapter* merge = nullptr; // folded into the weights (a benchmark baseline)
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual Device device() const = 0;
  virtual const ModelConfig& config() const = 0;
  virtual KvGeometry kv_geometry() const = 0;
  // Bytes held by the base weights.
  virtual size_t weights_bytes() const = 0;
  // A store of `num_slots` adapter slots of up to `max_rank`, in the memory
  // this runner computes from; forward() takes only stores it made.
  virtual std::unique_ptr<LoraSlotStore> make_lora_slots(int32_t num_slots, int32_t max_rank) const = 0;
  // Runs `batch`: writes its tokens' K/V into the blocks its block tables
  // name and batch.num_logit_rows() rows of vocab_size logits into `logits`
  // (host memory), sequence after sequence. With `lora`, each sequence's
  // lora_slot adds that adapter to every projection it targets. Every
  // sequence's rows depend only on its own tokens and cache (batch invariance).
  virtual Status forward(const ForwardBatch& batch, const LoraSlotStore* lora, float* logits) = 0;
};

// Loads the model in `dir` onto options.device. A device this build or
// machine cannot run is refused, saying why.
Result<std::unique_ptr<ModelRunner>> load_model_runner(const ModelDir& model, const RunnerOptions& options);

}  // namespace loragate
