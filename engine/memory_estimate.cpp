#include "engine/memory_estimate.h"

#include <limits>
#include <string>

#include "adapters/lora_module.h"
#include "engine/engine.h"
#include "engine/kv_cache.h"
#include "model/checkpoint.h"
#include "kernels/cpu/matmul.h"

namespace loragate {
namespace {

int64_t packed_bytes(int64_t rows, int64_t cols, WeightType storage) {
  return static_cast<int64_t>(cpu::PackedMatrix::bytes_for(rows, cols, storage));
}

Status positive(const char* name, int64_t value) {
  if (value > 0) return Status::ok();
  return Status::invalid_argument(std::string("model config: ") + name + " must be > 0, got " + std::to_string(value));
}

}  // namespace

Result<MemoryEstimate> estimate_engine_memory(const ModelConfig& c, const EngineOptions& options) {
  // The option checks of Engine::load, LlamaWeights::load and KvCache::create, in their order.
  if (options.max_num_batched_tokens <= 0) return Status::invalid_argument("max_num_batched_tokens must be > 0");
  if (options.max_num_seqs <= 0) return Status::invalid_argument("max_num_seqs must be > 0");
  if (options.max_loras < 0) return Status::invalid_argument("max_loras must be >= 0");
  if (options.max_loras > 0 && options.max_lora_rank <= 0) return Status::invalid_argument("max_lora_rank must be > 0");
  LG_RETURN_IF_ERROR(positive("hidden_size", c.hidden_size));
  LG_RETURN_IF_ERROR(positive("intermediate_size", c.intermediate_size));
  LG_RETURN_IF_ERROR(positive("num_hidden_layers", c.num_hidden_layers));
  LG_RETURN_IF_ERROR(positive("num_attention_heads", c.num_attention_heads));
  LG_RETURN_IF_ERROR(positive("num_key_value_heads", c.num_key_value_heads));
  LG_RETURN_IF_ERROR(positive("head_dim", c.head_dim));
  LG_RETURN_IF_ERROR(positive("vocab_size", c.vocab_size));
  if (options.kv_block_size <= 0) return Status::invalid_argument("kv block_size must be positive");

  MemoryEstimate e;

  // Weights, as LlamaWeights::load stores them, walking the same layout:
  // matrices packed in the storage type as the runner stacks them, the
  // embedding table in f32 for f32 storage and in bf16 otherwise, norms and
  // biases in f32. lm_head is packed from lm_head.weight or, tied, from the
  // embedding: a separate [vocab, hidden] matrix either way, so the layout
  // is walked as if the file held one.
  const WeightType elem = options.weight_dtype;
  const int64_t table_elem = elem == WeightType::kF32 ? 4 : 2;
  constexpr int64_t f32 = 4;
  auto numel = [](const TensorRef& t) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    return n;
  };
  auto stacked_bytes = [elem](auto begin, auto end) {
    int64_t rows = 0;
    for (auto it = begin; it != end; ++it) rows += it->rows;
    return packed_bytes(rows, begin->cols, elem);
  };
  LG_ASSIGN_OR_RETURN(const CheckpointLayout layout, checkpoint_layout(c, /*has_lm_head_tensor=*/true));
  e.weights_bytes = numel(layout.embed) * table_elem + numel(layout.final_norm) * f32 +
                    packed_bytes(layout.lm_head.rows, layout.lm_head.cols, elem);
  for (const LayerTensors& l : layout.layers) {
    e.weights_bytes += stacked_bytes(l.qkv.begin(), l.qkv.end()) + packed_bytes(l.o.rows, l.o.cols, elem) +
                       stacked_bytes(l.gate_up.begin(), l.gate_up.end()) +
                       packed_bytes(l.down.rows, l.down.cols, elem);
    e.weights_bytes += (numel(l.input_norm) + numel(l.post_attention_norm)) * f32;
    for (const TensorRef& bias : l.qkv_bias) e.weights_bytes += numel(bias) * f32;
  }

  // KV pool, as KvCache::create sizes it.
  const int64_t per_block = KvCache::bytes_per_block(c, options.kv_block_size);
  int64_t num_blocks = options.kv_num_blocks;
  if (num_blocks <= 0) {
    num_blocks = options.kv_cache_bytes / per_block;
    if (num_blocks > std::numeric_limits<int32_t>::max()) {
      return Status::invalid_argument("KV budget of " + std::to_string(options.kv_cache_bytes) + " bytes is " +
                                      std::to_string(num_blocks) + " blocks, more than a pool can index");
    }
  }
  if (num_blocks <= 0) {
    return Status::invalid_argument("KV budget of " + std::to_string(options.kv_cache_bytes) +
                                    " bytes holds no block (one block takes " + std::to_string(per_block) + ")");
  }
  e.kv_bytes = num_blocks * per_block;

  // LoRA slots, as the engine's AdapterCache sizes its LoraSlots: A and Bᵀ
  // of every (layer, module) for max_loras slots of max_lora_rank, f32.
  if (options.max_loras > 0) {
    int64_t per_layer = 0;
    for (LoraModule m : kAllLoraModules) per_layer += in_features(m, c) + out_features(m, c);
    e.lora_slot_bytes = c.num_hidden_layers * int64_t{options.max_loras} * options.max_lora_rank * per_layer * f32;
  }
  return e;
}

MemoryEstimate measure_engine_memory(const Engine& engine) {
  MemoryEstimate m;
  m.weights_bytes = static_cast<int64_t>(engine.runner().weights_bytes());
  m.kv_bytes = engine.kv_cache_bytes();
  m.lora_slot_bytes = engine.adapters() != nullptr ? static_cast<int64_t>(engine.adapters()->slots().bytes()) : 0;
  return m;
}

}  // namespace loragate
