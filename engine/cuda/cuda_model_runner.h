// CudaModelRunner: forward passes on one GPU, through the CUDA ops of
// kernels/cuda/ (their plain-C++ entry points; no CUDA header is needed here).
//
// The computation is LlamaModel::forward's, step for step: the weights are
// bf16 in device memory (q/k/v and gate/up stacked as on the CPU), norms and
// biases f32, activations f32 and the KV cache f32 in the CPU's paged layout.
// The projections run on cuBLASLt as bf16 x bf16 with f32 accumulation, so
// each activation is rounded to bf16 first: logits equal the CPU runner's
// with bf16 weights (WeightType::kBF16) up to that rounding, not bit for bit.
//
// Everything is queued on one stream and forward() synchronises it before it
// returns; adapter uploads (CudaLoraSlots) go through the same stream, so
// they are ordered with the passes. Not done: CUDA graphs for decode steps,
// split-K attention, a copy stream separate from compute, quantised weights,
// merged adapters.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/safetensors.h"
#include "engine/model_runner.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/cuda_stream.h"
#include "kernels/cuda/gemm_cublaslt.h"

namespace loragate {

class CudaLoraSlots;
struct FlatBatch;

class CudaModelRunner final : public ModelRunner {
 public:
  // Loads `model` onto options.device (which must be a CUDA
  // device this machine has). Only bf16 weights and no merge.
  static Result<std::unique_ptr<CudaModelRunner>> load(const ModelDir& model, const RunnerOptions& options);
  CudaModelRunner(const CudaModelRunner&) = delete;
  CudaModelRunner& operator=(const CudaModelRunner&) = delete;
  ~CudaModelRunner() override;

  Device device() const override { return {Device::Kind::kCuda, device_index_}; }
  const ModelConfig& config() const override { return config_; }
  KvGeometry kv_geometry() const override;
  size_t weights_bytes() const override { return weights_bytes_; }
  // A CudaLoraSlots in this runner's device memory, written through its stream.
  std::unique_ptr<LoraSlotStore> make_lora_slots(int32_t num_slots, int32_t max_rank) const override;
  Status forward(const ForwardBatch& batch, const LoraSlotStore* lora, float* logits) override;

 private:
  struct Layer {
    cuda::DeviceBuffer input_norm, post_attn_norm;  // [hidden] f32
    cuda::DeviceBuffer qkv;                         // [q_out + 2 * kv_out, hidden] bf16
    cuda::DeviceBuffer qkv_bias;                    // [q_out + 2 * kv_out] f32 (Qwen2); empty otherwise
    cuda::DeviceBuffer o;                           // [hidden, q_out] bf16
    cuda::DeviceBuffer gate_up;                     // [2 * intermediate, hidden] bf16
    cuda::DeviceBuffer down;                        // [hidden, intermediate] bf16
  };
  // A step's index arrays and RoPE tables: where each lives in the `meta`
  // buffers (element offsets; every element is 4 bytes).
  struct MetaLayout {
    size_t token_ids = 0, token_seqs = 0, kv_positions = 0, block_tables = 0, logits_rows = 0;
    size_t seg_slot = 0, seg_begin = 0, seg_end = 0, rope_cos = 0, rope_sin = 0, total = 0;
  };
  // Per-step device memory, grown to the largest step seen and kept.
  struct Workspace {
    cuda::DeviceBuffer hidden, normed, x_bf16, qkv, attn, proj, gate_up, act, lora_h, logits;
    cuda::DeviceBuffer meta;           // MetaLayout's arrays on the device
    cuda::HostPinnedBuffer meta_host;  // and their host image, copied in one go
  };

  CudaModelRunner() = default;
  Status load_weights(const WeightStore& store);
  Status grow_workspace(int64_t tokens, int64_t logit_rows, int64_t lora_rank, size_t meta_elements);
  MetaLayout meta_layout(const FlatBatch& f) const;
  // Queues the whole of a validated step on the stream; forward() waits for it.
  Status run(const ForwardBatch& batch, const CudaLoraSlots* slots, float* logits);

  ModelConfig config_;
  int device_index_ = 0;
  std::shared_ptr<cuda::Stream> stream_;
  cuda::CublasLt lt_;
  cuda::DeviceBuffer embed_;       // [vocab, hidden] bf16
  std::vector<Layer> layers_;
  cuda::DeviceBuffer final_norm_;  // [hidden] f32
  cuda::DeviceBuffer lm_head_;     // [vocab, hidden] bf16; empty when tied to embed_
  size_t weights_bytes_ = 0;
  int32_t block_size_ = 0, num_blocks_ = 0;
  std::vector<cuda::DeviceBuffer> k_cache_, v_cache_;  // per layer [blocks, block_size, kv_heads, head_dim] f32
  std::vector<float> inv_freq_;                        // [head_dim / 2], rope_scaling applied
  Workspace ws_;
};

}  // namespace loragate
