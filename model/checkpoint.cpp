#include "model/checkpoint.h"

#include "model/safetensors.h"

namespace loragate {

std::string layer_tensor_name(int64_t layer, const char* suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

std::vector<LinearTensor> CheckpointLayout::linears() const {
  std::vector<LinearTensor> out;
  out.reserve(layers.size() * 7 + 1);
  for (const LayerTensors& l : layers) {
    out.insert(out.end(), l.qkv.begin(), l.qkv.end());
    out.push_back(l.o);
    out.insert(out.end(), l.gate_up.begin(), l.gate_up.end());
    out.push_back(l.down);
  }
  out.push_back(lm_head);
  return out;
}

Result<CheckpointLayout> checkpoint_layout(const ModelConfig& c, bool has_lm_head_tensor) {
  if (!has_lm_head_tensor && !c.tie_word_embeddings) {
    return Status::not_found("tensor 'lm_head.weight' missing and tie_word_embeddings is false");
  }
  const int64_t h = c.hidden_size, q_out = c.num_attention_heads * c.head_dim,
                kv_out = c.num_key_value_heads * c.head_dim, inter = c.intermediate_size;
  CheckpointLayout layout;
  layout.embed = {"model.embed_tokens.weight", {c.vocab_size, h}};
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    auto linear = [l](const char* suffix, int64_t rows, int64_t cols) {
      return LinearTensor{layer_tensor_name(l, suffix), rows, cols};
    };
    LayerTensors t;
    t.input_norm = {layer_tensor_name(l, "input_layernorm.weight"), {h}};
    t.post_attention_norm = {layer_tensor_name(l, "post_attention_layernorm.weight"), {h}};
    if (c.attention_bias) {
      t.qkv_bias = {{layer_tensor_name(l, "self_attn.q_proj.bias"), {q_out}},
                    {layer_tensor_name(l, "self_attn.k_proj.bias"), {kv_out}},
                    {layer_tensor_name(l, "self_attn.v_proj.bias"), {kv_out}}};
    }
    t.qkv = {linear("self_attn.q_proj.weight", q_out, h), linear("self_attn.k_proj.weight", kv_out, h),
             linear("self_attn.v_proj.weight", kv_out, h)};
    t.o = linear("self_attn.o_proj.weight", h, q_out);
    t.gate_up = {linear("mlp.gate_proj.weight", inter, h), linear("mlp.up_proj.weight", inter, h)};
    t.down = linear("mlp.down_proj.weight", h, inter);
    layout.layers.push_back(std::move(t));
  }
  layout.final_norm = {"model.norm.weight", {h}};
  layout.lm_head = {"lm_head.weight", c.vocab_size, h};
  layout.lm_head_source = has_lm_head_tensor ? LmHeadSource::kOwnTensor : LmHeadSource::kTiedEmbedding;
  return layout;
}

Result<CheckpointLayout> checkpoint_layout(const ModelConfig& config, const WeightStore& store) {
  return checkpoint_layout(config, store.find("lm_head.weight") != nullptr);
}

}  // namespace loragate
