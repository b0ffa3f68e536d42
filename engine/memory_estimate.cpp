#include "engine/memory_estimate.h"

#include <limits>
#include <string>

#include "adapters/lora_module.h"
#include "engine/kv_cache.h"
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

  // Weights, as LlamaWeights::load stores them: matrices packed in the
  // storage type, the embedding table in f32 for f32 storage and in bf16
  // otherwise, norms and biases in f32. lm_head is packed from
  // lm_head.weight or, tied, from the embedding: a separate [vocab, hidden]
  // matrix either way, so tying changes nothing here.
  const WeightType elem = options.weight_dtype;
  const int64_t table_elem = elem == WeightType::kF32 ? 4 : 2;
  constexpr int64_t f32 = 4;
  const int64_t h = c.hidden_size, q_out = c.num_attention_heads * c.head_dim,
                kv_out = c.num_key_value_heads * c.head_dim, inter = c.intermediate_size;
  int64_t layer = 0;
  layer += packed_bytes(q_out + 2 * kv_out, h, elem);  // qkv
  layer += packed_bytes(h, q_out, elem);               // o
  layer += packed_bytes(2 * inter, h, elem);           // gate_up
  layer += packed_bytes(h, inter, elem);               // down
  layer += 2 * h * f32;                                // input and post-attention norms
  if (c.attention_bias) layer += (q_out + 2 * kv_out) * f32;
  e.weights_bytes = c.vocab_size * h * table_elem       // embedding
                    + c.num_hidden_layers * layer      //
                    + h * f32                          // final norm
                    + packed_bytes(c.vocab_size, h, elem);  // lm_head

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
