// TrainModel: the forward and backward pass of a frozen Llama-family base
// with trainable LoRA matrices, for fine-tuning.
//
// The forward pass is the server's: the same packed weights and matmul
// kernels (any storage type; a quantised base trains LoRA on top of its
// dequantised values, QLoRA-style), the same RMSNorm, RoPE and SwiGLU ops.
// The backward pass runs through every op back to the first layer's input
// and accumulates gradients for the LoRA matrices only; the base's weights
// are read transposed from copies packed once at create(). The sequences of
// a batch are laid end to end: every linear layer runs once over all their
// tokens, attention runs per sequence (causal, GQA).
//
// Activations are kept per layer for the backward pass (they are small next
// to the weights at training lengths); attention probabilities are recomputed.
// Thread-safe for concurrent calls only on different TrainModels.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "common/status.h"
#include "engine/llama_model.h"
#include "trainer/lora_params.h"
#include "trainer/train_data.h"

namespace loragate::train {

// Summed cross-entropy (natural log) over the target tokens of a batch.
struct LossSum {
  double nll = 0;
  int64_t tokens = 0;
  double mean() const { return tokens > 0 ? nll / static_cast<double>(tokens) : 0.0; }
};

class TrainModel {
 public:
  // `base` must outlive the TrainModel. Refuses what training does not
  // support yet (int8-outlier storage, sliding-window attention), naming it.
  static Result<std::unique_ptr<TrainModel>> create(const LlamaModel& base);
  ~TrainModel();

  const ModelConfig& config() const;

  // Forward and backward over `batch`: adds grad_scale * d(nll)/d(theta) to
  // every LoRA gradient of `params`, and returns the loss summed over the
  // batch's target tokens. grad_scale is 1 / (target tokens of the optimizer
  // step) for a mean loss.
  LossSum forward_backward(std::span<const TrainExample* const> batch, LoraParams& params, float grad_scale);

  // The forward pass only: the loss summed over the target tokens.
  LossSum loss(std::span<const TrainExample* const> batch, const LoraParams& params);

 private:
  struct Impl;
  explicit TrainModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace loragate::train
