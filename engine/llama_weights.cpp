#include "engine/llama_weights.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>

#include "engine/quantized_file.h"

namespace loragate {
namespace {

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

// Reads the linear weights: float tensors packed (quantised, if at all, as
// they are) or, from a `loragate quantize` file, quantised ones as they are.
class MatrixReader {
 public:
  MatrixReader(const WeightStore& store, std::optional<WeightType> file_type, WeightType storage)
      : store_(store), file_type_(file_type), storage_(storage) {}

  // The matrix stacked from `parts` (each [rows_i, cols]), each with its
  // LoRA merged in when given (float files only).
  Result<cpu::PackedMatrix> stacked(const std::vector<LinearTensor>& parts,
                                    const std::vector<const LoraWeights*>& merges = {}) const {
    if (file_type_) return pack_quantized_file_matrix(store_, parts, *file_type_, storage_);
    std::vector<Part> tensors;
    for (size_t i = 0; i < parts.size(); ++i) {
      LG_ASSIGN_OR_RETURN(const TensorView* t, store_.require(parts[i].name, {parts[i].rows, parts[i].cols}));
      tensors.push_back({t, i < merges.size() ? merges[i] : nullptr});
    }
    return pack_stacked(store_, tensors, storage_);
  }

 private:
  const WeightStore& store_;
  std::optional<WeightType> file_type_;
  WeightType storage_;
};

}  // namespace

Result<std::unique_ptr<LlamaWeights>> LlamaWeights::load(const WeightStore& store, const ModelConfig& c,
                                                         WeightType storage, const LoraAdapter* merge) {
  LG_ASSIGN_OR_RETURN(std::optional<WeightType> file_type, quantized_file_type(store));
  if (file_type) {
    LG_RETURN_IF_ERROR(check_quantized_storage(*file_type, storage, store.dir()));
    if (merge != nullptr) return Status::unsupported("an adapter cannot be merged into quantised weights");
  }
  const MatrixReader matrices(store, file_type, storage);
  auto w = std::unique_ptr<LlamaWeights>(new LlamaWeights());
  w->storage_ = storage;
  w->hidden_ = c.hidden_size;
  LG_ASSIGN_OR_RETURN(const CheckpointLayout layout, checkpoint_layout(c, store));

  LG_ASSIGN_OR_RETURN(const TensorView* embed, store.require(layout.embed.name, layout.embed.shape));
  // Only gathered a row per token, so quantised bases keep the table in bf16.
  if (storage != WeightType::kF32) {
    convert_table(store, *embed, w->embed_bf16_);
  } else {
    convert_table(store, *embed, w->embed_f32_);
  }

  for (size_t l = 0; l < layout.layers.size(); ++l) {
    const LayerTensors& t = layout.layers[l];
    LayerWeights lw;
    LG_ASSIGN_OR_RETURN(const TensorView* in_norm, store.require(t.input_norm.name, t.input_norm.shape));
    LG_ASSIGN_OR_RETURN(const TensorView* post_norm,
                        store.require(t.post_attention_norm.name, t.post_attention_norm.shape));
    for (const TensorRef& bias : t.qkv_bias) {
      LG_ASSIGN_OR_RETURN(const TensorView* b, store.require(bias.name, bias.shape));
      std::vector<float> part = take_f32(store, *b);
      lw.qkv_bias.insert(lw.qkv_bias.end(), part.begin(), part.end());
    }
    lw.input_norm = take_f32(store, *in_norm);
    lw.post_attn_norm = take_f32(store, *post_norm);
    const auto layer = static_cast<int64_t>(l);
    auto merged = [&](LoraModule m) { return merge != nullptr ? merge->weights(layer, m) : nullptr; };
    LG_ASSIGN_OR_RETURN(lw.qkv, matrices.stacked({t.qkv.begin(), t.qkv.end()},
                                                 {merged(LoraModule::kQ), merged(LoraModule::kK),
                                                  merged(LoraModule::kV)}));
    LG_ASSIGN_OR_RETURN(lw.o, matrices.stacked({t.o}, {merged(LoraModule::kO)}));
    LG_ASSIGN_OR_RETURN(lw.gate_up, matrices.stacked({t.gate_up.begin(), t.gate_up.end()},
                                                     {merged(LoraModule::kGate), merged(LoraModule::kUp)}));
    LG_ASSIGN_OR_RETURN(lw.down, matrices.stacked({t.down}, {merged(LoraModule::kDown)}));
    w->layers_.push_back(std::move(lw));
  }

  LG_ASSIGN_OR_RETURN(const TensorView* norm, store.require(layout.final_norm.name, layout.final_norm.shape));
  w->final_norm_ = take_f32(store, *norm);
  if (layout.lm_head_source == LmHeadSource::kOwnTensor) {
    LG_ASSIGN_OR_RETURN(w->lm_head_, matrices.stacked({layout.lm_head}));
  } else if (is_quantized(storage)) {
    // Quantised from the file's values, not the bf16 table (its pages were
    // released and are read back a panel at a time).
    LG_ASSIGN_OR_RETURN(w->lm_head_, matrices.stacked({{embed->name, c.vocab_size, c.hidden_size}}));
  } else {
    // From the table already converted, not the file again: bf16 storage
    // repacks its own bf16 values unchanged, as from the file's.
    w->lm_head_ = storage == WeightType::kBF16
                      ? cpu::PackedMatrix::pack(w->embed_bf16_.data(), DType::kBF16, c.vocab_size, c.hidden_size,
                                                storage)
                      : cpu::PackedMatrix::pack(w->embed_f32_.data(), DType::kF32, c.vocab_size, c.hidden_size,
                                                storage);
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
