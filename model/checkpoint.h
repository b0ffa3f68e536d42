// The tensors of a Llama-family checkpoint, walked once.
//
// checkpoint_layout() names every tensor a runner reads, with its shape,
// grouped as the runners fuse them (q/k/v into one matrix, gate/up into
// another), and says where the lm_head comes from. The CPU weights, the
// CUDA weights, the memory estimate and `loragate quantize` all follow this
// one walk, so a rule of the layout (attention biases, a tied lm_head, a
// quantised file that always holds its lm_head) is written once.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/model_config.h"

namespace loragate {

class WeightStore;

// A tensor of the checkpoint: its Hugging Face name and shape.
struct TensorRef {
  std::string name;
  std::vector<int64_t> shape;
};

// A linear weight W [rows, cols]: rows output features, cols input features.
struct LinearTensor {
  std::string name;  // e.g. "model.layers.0.self_attn.q_proj.weight"
  int64_t rows = 0, cols = 0;
};

struct LayerTensors {
  TensorRef input_norm;               // [hidden]
  TensorRef post_attention_norm;      // [hidden]
  std::vector<TensorRef> qkv_bias;    // q, k, v biases; empty without attention_bias
  std::array<LinearTensor, 3> qkv;    // q, k, v: one stacked matrix in the runners
  LinearTensor o;
  std::array<LinearTensor, 2> gate_up;  // gate, up: one stacked matrix
  LinearTensor down;
};

// Where the output projection's weights come from.
enum class LmHeadSource {
  kOwnTensor,      // lm_head.weight in the checkpoint
  kTiedEmbedding,  // the embedding table (tie_word_embeddings, no lm_head.weight)
};

struct CheckpointLayout {
  TensorRef embed;  // [vocab, hidden]
  std::vector<LayerTensors> layers;
  TensorRef final_norm;  // [hidden]
  LinearTensor lm_head;  // "lm_head.weight" [vocab, hidden], whatever its source
  LmHeadSource lm_head_source = LmHeadSource::kOwnTensor;

  // The seven projections of every layer in file order (q k v o gate up
  // down), then lm_head: what `loragate quantize` writes.
  std::vector<LinearTensor> linears() const;
};

// The Hugging Face name of a layer's tensor: "model.layers.L." + suffix.
std::string layer_tensor_name(int64_t layer, const char* suffix);

// The layout of a checkpoint of `config` that does (`has_lm_head_tensor`)
// or does not hold lm_head.weight. Without it, the config must tie the
// lm_head to the embeddings; the error names the tensor otherwise.
Result<CheckpointLayout> checkpoint_layout(const ModelConfig& config, bool has_lm_head_tensor);
// The layout of the checkpoint in `store`: the lm_head from its own tensor
// when the files hold one (a quantised file always does), else tied.
Result<CheckpointLayout> checkpoint_layout(const ModelConfig& config, const WeightStore& store);

}  // namespace loragate
