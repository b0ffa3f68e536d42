// LlamaWeights: a Llama-family model's weights, converted from the files'
// dtype to the engine's storage type and packed for the CPU kernels.
//
// q/k/v are packed as one fused [q_out + k_out + v_out, hidden] matrix and
// gate/up as one [2 * intermediate, hidden] matrix: one pass over the
// activations per layer instead of three or two. Immutable after load.
//
// Loading reads each tensor row by row from the mapped file (no whole f32
// copies, stacked or merged) and releases the file's pages once packed, so
// memory at its peak stays near that of the loaded weights.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "adapters/lora_adapter.h"
#include "common/dtype.h"
#include "common/weight_type.h"
#include "common/status.h"
#include "model/model_config.h"
#include "model/safetensors.h"
#include "kernels/cpu/matmul.h"

namespace loragate {

struct LayerWeights {
  std::vector<float> input_norm;       // [hidden]
  std::vector<float> post_attn_norm;   // [hidden]
  cpu::PackedMatrix qkv;               // [q_out + 2 * kv_out, hidden]
  std::vector<float> qkv_bias;         // [q_out + 2 * kv_out] (Qwen2), empty otherwise
  cpu::PackedMatrix o;                 // [hidden, q_out]
  cpu::PackedMatrix gate_up;           // [2 * intermediate, hidden]
  cpu::PackedMatrix down;              // [hidden, intermediate]
};

class LlamaWeights {
 public:
  // Reads every tensor the config calls for from `store`, checking names and
  // shapes; an error names the missing or misshaped tensor and its file.
  // With `merge`, that adapter is folded into the weights (W + scaling·B·A):
  // the PEFT merge_and_unload baseline the multi-LoRA benchmark compares with.
  static Result<std::unique_ptr<LlamaWeights>> load(const WeightStore& store, const ModelConfig& config,
                                                    WeightType storage, const LoraAdapter* merge = nullptr);

  const std::vector<LayerWeights>& layers() const { return layers_; }
  const std::vector<float>& final_norm() const { return final_norm_; }
  const cpu::PackedMatrix& lm_head() const { return lm_head_; }
  WeightType storage() const { return storage_; }
  // Writes the embedding row of `token` (f32) into `out`.
  void embed(int32_t token, float* out) const;
  // Bytes held by all weights.
  size_t bytes() const;

 private:
  WeightType storage_ = WeightType::kF32;
  int64_t hidden_ = 0;
  std::vector<uint16_t> embed_bf16_;   // [vocab, hidden] unless storage is F32
  std::vector<float> embed_f32_;       // [vocab, hidden] when storage is F32
  std::vector<LayerWeights> layers_;
  std::vector<float> final_norm_;
  cpu::PackedMatrix lm_head_;
};

}  // namespace loragate
