#include "engine/llama_weights.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace loragate {
namespace {

std::string layer_key(int64_t layer, const char* suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

// Loading converts tensor by tensor straight from the mapped file and
// releases each tensor's file pages once converted: no tensor is ever copied
// whole in f32, so the peak at load stays near the converted weights.

// A small tensor's values as f32 (files may hold F32, F16 or BF16, possibly
// unaligned); its file pages are released.
std::vector<float> take_f32(const WeightStore& store, const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  convert_to_f32(t.dtype, t.data, out.data(), out.size());
  store.release(t.data, t.nbytes);
  return out;
}

// Adds row `o` of scaling·B·A to `w` (row `o` of the base weight), each
// element computed in double and rounded once to f32 (as a PEFT
// merge_and_unload would, up to rounding).
void merge_lora_row(float* w, int64_t o, const LoraWeights& lora) {
  for (int64_t i = 0; i < lora.in; ++i) {
    double delta = 0;
    for (int64_t r = 0; r < lora.rank; ++r) delta += double(lora.b[o * lora.rank + r]) * lora.a[r * lora.in + i];
    w[i] = static_cast<float>(w[i] + lora.scaling * delta);
  }
}

// One part of a stacked matrix: a tensor and, optionally, a LoRA merged into it.
struct Part {
  const TensorView* tensor;
  const LoraWeights* merge = nullptr;
};

// The rows of several [rows_i, cols] tensors stacked, read from the mapped
// file as they are packed (LoRA merged in row by row); the file pages of each
// packed panel are released.
class StackedRows final : public cpu::PackedMatrix::RowSource {
 public:
  StackedRows(const WeightStore& store, const std::vector<Part>& parts) : store_(store), parts_(parts) {
    cols_ = parts.front().tensor->shape[1];
    for (const Part& p : parts) {
      first_row_.push_back(rows_);
      rows_ += p.tensor->shape[0];
    }
  }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }

  void read_row(int64_t row, float* out) const override {
    const size_t i = part_of(row);
    const TensorView& t = *parts_[i].tensor;
    const int64_t r = row - first_row_[i];
    convert_to_f32(t.dtype, t.data + static_cast<size_t>(r) * row_bytes(t), out, static_cast<size_t>(cols_));
    if (parts_[i].merge != nullptr) merge_lora_row(out, r, *parts_[i].merge);
  }

  void rows_packed(int64_t begin, int64_t end) const override {
    for (size_t i = 0; i < parts_.size(); ++i) {
      const int64_t lo = std::max(begin, first_row_[i]) - first_row_[i];
      const int64_t hi = std::min(end, first_row_[i] + parts_[i].tensor->shape[0]) - first_row_[i];
      if (lo >= hi) continue;
      const TensorView& t = *parts_[i].tensor;
      store_.release(t.data + static_cast<size_t>(lo) * row_bytes(t), static_cast<size_t>(hi - lo) * row_bytes(t));
    }
  }

  // Releases what rows_packed() could not: pages straddling two panels.
  void release_all() const {
    for (const Part& p : parts_) store_.release(p.tensor->data, p.tensor->nbytes);
  }

 private:
  size_t row_bytes(const TensorView& t) const { return static_cast<size_t>(cols_) * dtype_size(t.dtype); }
  size_t part_of(int64_t row) const {
    size_t i = 0;
    while (i + 1 < parts_.size() && row >= first_row_[i + 1]) ++i;
    return i;
  }

  const WeightStore& store_;
  const std::vector<Part>& parts_;
  std::vector<int64_t> first_row_;
  int64_t rows_ = 0, cols_ = 0;
};

// Stacks the rows of several [rows_i, cols] tensors and packs them as one matrix.
cpu::PackedMatrix pack_stacked(const WeightStore& store, const std::vector<Part>& parts, WeightType storage) {
  const StackedRows source(store, parts);
  cpu::PackedMatrix packed = cpu::PackedMatrix::pack_rows(source, source.rows(), source.cols(), storage);
  source.release_all();
  return packed;
}

// Converts the [rows, cols] tensor `t` into `out` (rows × cols values of f32
// or bf16 storage) a chunk of rows at a time, releasing each chunk's pages.
template <typename Stored>
void convert_table(const WeightStore& store, const TensorView& t, std::vector<Stored>& out) {
  constexpr int64_t kChunkRows = 64;
  const int64_t rows = t.shape[0], cols = t.shape[1];
  const size_t row_bytes = static_cast<size_t>(cols) * dtype_size(t.dtype);
  out.resize(static_cast<size_t>(rows * cols));
  std::vector<float> chunk;
  for (int64_t r0 = 0; r0 < rows; r0 += kChunkRows) {
    const int64_t n = std::min(kChunkRows, rows - r0);
    const uint8_t* src = t.data + static_cast<size_t>(r0) * row_bytes;
    const size_t count = static_cast<size_t>(n * cols);
    Stored* dst = out.data() + static_cast<size_t>(r0 * cols);
    if constexpr (std::is_same_v<Stored, float>) {
      convert_to_f32(t.dtype, src, dst, count);
    } else {
      chunk.resize(count);
      convert_to_f32(t.dtype, src, chunk.data(), count);
      for (size_t i = 0; i < count; ++i) dst[i] = f32_to_bf16(chunk[i]);
    }
    store.release(src, static_cast<size_t>(n) * row_bytes);
  }
  store.release(t.data, t.nbytes);
}

}  // namespace

Result<std::unique_ptr<LlamaWeights>> LlamaWeights::load(const WeightStore& store, const ModelConfig& c,
                                                         WeightType storage, const LoraAdapter* merge) {
  auto w = std::unique_ptr<LlamaWeights>(new LlamaWeights());
  w->storage_ = storage;
  w->hidden_ = c.hidden_size;
  const int64_t h = c.hidden_size, q_out = c.num_attention_heads * c.head_dim,
                kv_out = c.num_key_value_heads * c.head_dim, inter = c.intermediate_size;

  LG_ASSIGN_OR_RETURN(const TensorView* embed, store.require("model.embed_tokens.weight", {c.vocab_size, h}));
  // Only gathered a row per token, so quantised bases keep the table in bf16.
  if (storage != WeightType::kF32) {
    convert_table(store, *embed, w->embed_bf16_);
  } else {
    convert_table(store, *embed, w->embed_f32_);
  }

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
        std::vector<float> part = take_f32(store, *b);
        lw.qkv_bias.insert(lw.qkv_bias.end(), part.begin(), part.end());
      }
    }
    lw.input_norm = take_f32(store, *in_norm);
    lw.post_attn_norm = take_f32(store, *post_norm);
    auto merged = [&](LoraModule m) { return merge != nullptr ? merge->weights(l, m) : nullptr; };
    lw.qkv = pack_stacked(
        store, {{q, merged(LoraModule::kQ)}, {k, merged(LoraModule::kK)}, {v, merged(LoraModule::kV)}}, storage);
    lw.o = pack_stacked(store, {{o, merged(LoraModule::kO)}}, storage);
    lw.gate_up = pack_stacked(store, {{gate, merged(LoraModule::kGate)}, {up, merged(LoraModule::kUp)}}, storage);
    lw.down = pack_stacked(store, {{down, merged(LoraModule::kDown)}}, storage);
    w->layers_.push_back(std::move(lw));
  }

  LG_ASSIGN_OR_RETURN(const TensorView* norm, store.require("model.norm.weight", {h}));
  w->final_norm_ = take_f32(store, *norm);
  const TensorView* head = store.find("lm_head.weight");
  if (head != nullptr) {
    LG_ASSIGN_OR_RETURN(head, store.require("lm_head.weight", {c.vocab_size, h}));
    w->lm_head_ = pack_stacked(store, {{head}}, storage);
  } else if (c.tie_word_embeddings && is_quantized(storage)) {
    // Quantised from the file's values, not the bf16 table (its pages were
    // released and are read back a panel at a time).
    w->lm_head_ = pack_stacked(store, {{embed}}, storage);
  } else if (c.tie_word_embeddings) {
    // From the table already converted, not the file again: bf16 storage
    // repacks its own bf16 values unchanged, as from the file's.
    w->lm_head_ = storage == WeightType::kBF16
                      ? cpu::PackedMatrix::pack(w->embed_bf16_.data(), DType::kBF16, c.vocab_size, h, storage)
                      : cpu::PackedMatrix::pack(w->embed_f32_.data(), DType::kF32, c.vocab_size, h, storage);
  } else {
    return Status::not_found("tensor 'lm_head.weight' missing and tie_word_embeddings is false");
  }
  return w;
}

void LlamaWeights::embed(int32_t token, float* out) const {
  const size_t offset = static_cast<size_t>(token) * static_cast<size_t>(hidden_);
  if (storage_ != WeightType::kF32) {
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
