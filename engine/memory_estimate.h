// MemoryEstimate: the bytes an Engine holds for its weights, KV cache and
// LoRA slots, either predicted from a ModelConfig and EngineOptions before
// loading anything (estimate_engine_memory: e.g. to decide whether a
// candidate base fits beside the serving one) or read off a loaded engine
// (measure_engine_memory).
//
// The three parts are the allocations Engine::load makes up front and keeps
// for the engine's life. Not counted: transient load-time buffers (an f32
// copy of each matrix while it is packed, the mmapped safetensors files),
// the per-step workspace and logits (grown on demand, proportional to
// max_num_batched_tokens), adapters cached in host memory (grow up to
// adapter_host_bytes as adapters load) and the tokenizer.
//
// Pure functions over values; thread-safe.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "engine/engine_types.h"
#include "model/model_config.h"

namespace loragate {

class Engine;

struct MemoryEstimate {
  int64_t weights_bytes = 0;    // LlamaWeights::bytes(): packed matrices, embedding, norms, biases
  int64_t kv_bytes = 0;         // KvCache::bytes(): the whole K/V pool
  int64_t lora_slot_bytes = 0;  // LoraSlots::bytes(): 0 when max_loras is 0
  int64_t total() const { return weights_bytes + kv_bytes + lora_slot_bytes; }

  bool operator==(const MemoryEstimate&) const = default;
};

// What Engine::load(dir, options) would allocate for a model with `config`
// (the config.json of `dir`), matching the loaded engine byte for byte.
// Refuses what Engine::load would refuse for these options without reading
// weights: a non-positive kv_block_size,
// a KV budget too small for one block, negative max_loras, max_lora_rank <= 0
// with adapters, and a config with non-positive shapes.
Result<MemoryEstimate> estimate_engine_memory(const ModelConfig& config, const EngineOptions& options);

// The same three parts as held by a loaded engine.
MemoryEstimate measure_engine_memory(const Engine& engine);

}  // namespace loragate
