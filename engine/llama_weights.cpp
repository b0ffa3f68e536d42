#include "engine/llama_weights.h"

#include <cstring>

namespace loragate {
namespace {

std::string layer_key(int64_t layer, const char* suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

// A tensor's values as f32 (files may hold F32, F16 or BF16, possibly unaligned).
std::vector<float> to_f32(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  convert_to_f32(t.dtype, t.data, out.data(), out.size());
  return out;
}

// W + scaling·B·A, computed in double and rounded once to f32 (as a PEFT
// merge_and_unload would, up to rounding).
void merge_lora(std::vector<float>& w, const LoraWeights& lora) {
  for (int64_t o = 0; o < lora.out; ++o) {
    for (int64_t i = 0; i < lora.in; ++i) {
      double delta = 0;
      for (int64_t r = 0; r < lora.rank; ++r) delta += double(lora.b[o * lora.rank + r]) * lora.a[r * lora.in + i];
      w[o * lora.in + i] = static_cast<float>(w[o * lora.in + i] + lora.scaling * delta);
    }
  }
}

// One part of a stacked matrix: a tensor and, optionally, a LoRA merged into it.
struct Part {
  const TensorView* tensor;
  const LoraWeights* merge = nullptr;
};

// Stacks the rows of several [rows_i, cols] tensors and packs them as one matrix.
cpu::PackedMatrix pack_stacked(const std::vector<Part>& parts, DType storage) {
  int64_t rows = 0;
  const int64_t cols = parts.front().tensor->shape[1];
  for (const Part& p : parts) rows += p.tensor->shape[0];
  std::vector<float> stacked;
  stacked.reserve(static_cast<size_t>(rows * cols));
  for (const Part& p : parts) {
    std::vector<float> v = to_f32(*p.tensor);
    if (p.merge != nullptr) merge_lora(v, *p.merge);
    stacked.insert(stacked.end(), v.begin(), v.end());
  }
  return cpu::PackedMatrix::pack(stacked.data(), DType::kF32, rows, cols, storage);
}

}  // namespace

Result<std::unique_ptr<LlamaWeights>> LlamaWeights::load(const WeightStore& store, const ModelConfig& c,
                                                         DType storage, const LoraAdapter* merge) {
  if (storage != DType::kF32 && storage != DType::kBF16) {
    return Status::invalid_argument("weight storage must be f32 or bf16, got " + std::string(dtype_name(storage)));
  }
  auto w = std::unique_ptr<LlamaWeights>(new LlamaWeights());
  w->storage_ = storage;
  w->hidden_ = c.hidden_size;
  const int64_t h = c.hidden_size, q_out = c.num_attention_heads * c.head_dim,
                kv_out = c.num_key_value_heads * c.head_dim, inter = c.intermediate_size;

  LG_ASSIGN_OR_RETURN(const TensorView* embed, store.require("model.embed_tokens.weight", {c.vocab_size, h}));
  std::vector<float> embed_f32 = to_f32(*embed);

  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    LayerWeights lw;
    LG_ASSIGN_OR_RETURN(const TensorView* in_norm, store.require(layer_key(l, "input_layernorm.weight"), {h}));
    LG_ASSIGN_OR_RETURN(const TensorView* post_norm,
                        store.require(layer_key(l, "post_attention_layernorm.weight"), {h}));
    LG_ASSIGN_OR_RETURN(const TensorView* q, store.require(layer_key(l, "self_attn.q_proj.weight"), {q_out, h}));
    LG_ASSIGN_OR_RETURN(const TensorView* k, store.require(layer_key(l, "self_attn.k_proj.weight"), {kv_out, h}));
    LG_ASSIGN_OR_RETURN(const TensorView* v, store.require(layer_key(l, "self_attn.v_proj.weight"), {kv_out, h}));
    LG_ASSIGN_OR_RETURN(const TensorView* o, store.require(layer_key(l, "self_attn.o_proj.weight"), {h, q_out}));
    LG_ASSIGN_OR_RETURN(const TensorView* gate, store.require(layer_key(l, "mlp.gate_proj.weight"), {inter, h}));
    LG_ASSIGN_OR_RETURN(const TensorView* up, store.require(layer_key(l, "mlp.up_proj.weight"), {inter, h}));
    LG_ASSIGN_OR_RETURN(const TensorView* down, store.require(layer_key(l, "mlp.down_proj.weight"), {h, inter}));
    if (c.attention_bias) {
      LG_ASSIGN_OR_RETURN(const TensorView* qb, store.require(layer_key(l, "self_attn.q_proj.bias"), {q_out}));
      LG_ASSIGN_OR_RETURN(const TensorView* kb, store.require(layer_key(l, "self_attn.k_proj.bias"), {kv_out}));
      LG_ASSIGN_OR_RETURN(const TensorView* vb, store.require(layer_key(l, "self_attn.v_proj.bias"), {kv_out}));
      for (const TensorView* b : {qb, kb, vb}) {
        std::vector<float> part = to_f32(*b);
        lw.qkv_bias.insert(lw.qkv_bias.end(), part.begin(), part.end());
      }
    }
    lw.input_norm = to_f32(*in_norm);
    lw.post_attn_norm = to_f32(*post_norm);
    auto merged = [&](LoraModule m) { return merge != nullptr ? merge->weights(l, m) : nullptr; };
    lw.qkv = pack_stacked({{q, merged(LoraModule::kQ)}, {k, merged(LoraModule::kK)}, {v, merged(LoraModule::kV)}},
                          storage);
    lw.o = pack_stacked({{o, merged(LoraModule::kO)}}, storage);
    lw.gate_up = pack_stacked({{gate, merged(LoraModule::kGate)}, {up, merged(LoraModule::kUp)}}, storage);
    lw.down = pack_stacked({{down, merged(LoraModule::kDown)}}, storage);
    w->layers_.push_back(std::move(lw));
  }

  LG_ASSIGN_OR_RETURN(const TensorView* norm, store.require("model.norm.weight", {h}));
  w->final_norm_ = to_f32(*norm);
  const TensorView* head = store.find("lm_head.weight");
  if (head != nullptr) {
    LG_ASSIGN_OR_RETURN(head, store.require("lm_head.weight", {c.vocab_size, h}));
    w->lm_head_ = pack_stacked({{head}}, storage);
  } else if (c.tie_word_embeddings) {
    w->lm_head_ = cpu::PackedMatrix::pack(embed_f32.data(), DType::kF32, c.vocab_size, h, storage);
  } else {
    return Status::not_found("tensor 'lm_head.weight' missing and tie_word_embeddings is false");
  }

  if (storage == DType::kBF16) {
    w->embed_bf16_.resize(embed_f32.size());
    for (size_t i = 0; i < embed_f32.size(); ++i) w->embed_bf16_[i] = f32_to_bf16(embed_f32[i]);
  } else {
    w->embed_f32_ = std::move(embed_f32);
  }
  return w;
}

void LlamaWeights::embed(int32_t token, float* out) const {
  const size_t offset = static_cast<size_t>(token) * static_cast<size_t>(hidden_);
  if (storage_ == DType::kBF16) {
    convert_to_f32(DType::kBF16, embed_bf16_.data() + offset, out, static_cast<size_t>(hidden_));
  } else {
    std::memcpy(out, embed_f32_.data() + offset, static_cast<size_t>(hidden_) * sizeof(float));
  }
}

size_t LlamaWeights::bytes() const {
  size_t total = embed_bf16_.size() * 2 + embed_f32_.size() * 4 + final_norm_.size() * 4 + lm_head_.bytes();
  for (const LayerWeights& l : layers_) {
    total += l.qkv.bytes() + l.o.bytes() + l.gate_up.bytes() + l.down.bytes();
    total += (l.input_norm.size() + l.post_attn_norm.size() + l.qkv_bias.size()) * 4;
  }
  return total;
}

}  // namespace loragate
