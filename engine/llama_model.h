// LlamaModel: the forward pass of a Llama-family decoder (Llama 2/3, Mistral,
// Qwen2) on the CPU, over a paged KV cache.
//
// One forward() call runs any mix of prefill chunks and decode tokens. Every
// sequence's output depends only on its own tokens and cache (batch
// invariance). The model is immutable; the mutable per-step buffers live in a
// ForwardWorkspace owned by the caller (one per step loop).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "engine/forward_batch.h"
#include "engine/kv_cache.h"
#include "engine/llama_weights.h"
#include "adapters/lora_slots.h"
#include "model/model_config.h"
#include "model/model_dir.h"
#include "kernels/cpu/int8_matmul.h"

namespace loragate {

// Scratch memory of one forward pass, grown on demand and reused.
struct ForwardWorkspace {
  std::vector<float> hidden, normed, qkv, attn, proj, gate_up, act, rope_cos, rope_sin, scores;
  std::vector<cpu::LoraSegment> lora_segments;
  std::vector<std::pair<const ForwardSeq*, int64_t>> attention_items;  // (sequence, token in it)
};

class LlamaModel {
 public:
  // Converts the weights of `model` to `storage`.
  // With `merge`, that adapter is folded into the weights (see LlamaWeights::load).
  // `outlier_threshold`: int8-outlier storage runs activations above it in f32.
  static Result<std::unique_ptr<LlamaModel>> load(const ModelDir& model, WeightType storage,
                                                  const LoraAdapter* merge = nullptr,
                                                  float outlier_threshold = kDefaultOutlierThreshold);
  static Result<std::unique_ptr<LlamaModel>> from_parts(ModelConfig config, std::unique_ptr<LlamaWeights> weights);

  const ModelConfig& config() const { return config_; }
  const LlamaWeights& weights() const { return *weights_; }
  // int8-outlier storage: activation columns seen and run in f32 so far,
  // per layer (all its projections) and, last, the lm_head. Empty otherwise.
  std::vector<cpu::OutlierCounts> outlier_counts() const;

  // Runs `batch`, writing K/V of its tokens into `cache` at the positions the
  // block tables give, and writes one row of vocab_size logits per wanted
  // token (each sequence's num_logits from logits_begin), sequence after
  // sequence, into `logits` (batch.num_logit_rows() rows). With `lora`, each
  // sequence's lora_slot adds that adapter's update to every projection it targets.
  Status forward(const ForwardBatch& batch, KvCache& cache, ForwardWorkspace& ws, float* logits,
                 const LoraSlots* lora = nullptr) const;

 private:
  LlamaModel(ModelConfig config, std::unique_ptr<LlamaWeights> weights);
  void compute_rope(const ForwardBatch& batch, ForwardWorkspace& ws) const;
  void attention(const ForwardBatch& batch, int64_t layer, KvCache& cache, ForwardWorkspace& ws) const;
  // y = x · wᵀ, the W8A8 product for int8-outlier storage (counted under `counter`).
  void linear(const float* x, int64_t m, int64_t ldx, const cpu::PackedMatrix& w, float* y, int64_t ldy,
              size_t counter) const;

  struct OutlierCounter {
    std::atomic<int64_t> columns{0}, outliers{0};
  };

  ModelConfig config_;
  std::unique_ptr<LlamaWeights> weights_;
  std::vector<float> inv_freq_;  // [head_dim / 2], rope_scaling applied
  float outlier_threshold_ = kDefaultOutlierThreshold;
  mutable std::unique_ptr<OutlierCounter[]> outliers_;  // layers + 1 (lm_head), int8-outlier storage only
};

}  // namespace loragate
