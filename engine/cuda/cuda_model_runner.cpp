#include "engine/cuda/cuda_model_runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "common/dtype.h"
#include "engine/cuda/cuda_lora_slots.h"
#include "engine/flat_batch.h"
#include "engine/kv_cache.h"
#include "engine/quantized_file.h"
#include "engine/rope_tables.h"
#include "kernels/cuda/bf16_convert.h"
#include "kernels/cuda/bias_add.h"
#include "kernels/cuda/device_select.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gather_rows.h"
#include "kernels/cuda/kv_cache_write.h"
#include "kernels/cuda/paged_attention_varlen.h"
#include "kernels/cuda/residual_add.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/sgmv.h"
#include "kernels/cuda/silu_mul.h"

namespace loragate {
// A named namespace, not an anonymous one: lg_engine is a unity build, and
// llama_model.cpp's anonymous helpers would share this file's.
namespace cuda_runner {

constexpr int64_t kMaxHeadDim = 256;  // the attention kernel's limit

// A device copy of `bytes` at `data`. The stream is synchronised before
// returning, so `data` may be freed at once (load-time only).
Result<cuda::DeviceBuffer> upload(const void* data, size_t bytes, const cuda::Stream& stream) {
  LG_ASSIGN_OR_RETURN(cuda::DeviceBuffer b, cuda::DeviceBuffer::allocate(bytes));
  LG_RETURN_IF_ERROR(cuda::copy_to_device_async(b.get(), data, bytes, stream.get()));
  LG_RETURN_IF_ERROR(stream.synchronize());
  return Result<cuda::DeviceBuffer>(std::move(b));
}

template <class T>
Result<cuda::DeviceBuffer> upload(const std::vector<T>& v, const cuda::Stream& stream) {
  return upload(v.data(), v.size() * sizeof(T), stream);
}

// The tensor's values as f32 (norms, biases); its file pages are released.
std::vector<float> read_f32(const WeightStore& store, const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  convert_to_f32(t.dtype, t.data, out.data(), out.size());
  store.release(t.data, t.nbytes);
  return out;
}

// Appends the [rows, cols] tensor `t` to `out` as bf16, a chunk of rows at a
// time: bf16 files are copied, others rounded to nearest even, as the CPU's
// bf16 packing does, so both runners hold the same weights.
void append_bf16(const WeightStore& store, const TensorView& t, std::vector<uint16_t>& out) {
  constexpr int64_t kChunkRows = 64;
  const int64_t rows = t.shape[0], cols = t.shape.size() > 1 ? t.shape[1] : 1;
  const size_t row_bytes = static_cast<size_t>(cols) * dtype_size(t.dtype);
  std::vector<float> chunk;
  for (int64_t r0 = 0; r0 < rows; r0 += kChunkRows) {
    const auto count = static_cast<size_t>(std::min(kChunkRows, rows - r0) * cols);
    const uint8_t* src = t.data + static_cast<size_t>(r0) * row_bytes;
    const size_t at = out.size();
    out.resize(at + count);
    if (t.dtype == DType::kBF16) {
      std::memcpy(out.data() + at, src, count * sizeof(uint16_t));
    } else {
      chunk.resize(count);
      convert_to_f32(t.dtype, src, chunk.data(), count);
      for (size_t i = 0; i < count; ++i) out[at + i] = f32_to_bf16(chunk[i]);
    }
  }
  store.release(t.data, t.nbytes);
}

// The rows of `parts` stacked into one bf16 matrix, on the device.
Result<cuda::DeviceBuffer> upload_stacked(const WeightStore& store, const std::vector<LinearTensor>& parts,
                                          const cuda::Stream& stream) {
  std::vector<uint16_t> rows;
  for (const LinearTensor& p : parts) {
    LG_ASSIGN_OR_RETURN(const TensorView* t, store.require(p.name, {p.rows, p.cols}));
    append_bf16(store, *t, rows);
  }
  return upload(rows, stream);
}

// Makes `b` hold at least `bytes`; its old contents are dropped.
Status grow(cuda::DeviceBuffer& b, size_t bytes) {
  if (b.bytes() >= bytes || bytes == 0) return Status::ok();
  b = cuda::DeviceBuffer();  // free first: the peak stays at the new size
  LG_ASSIGN_OR_RETURN(b, cuda::DeviceBuffer::allocate(bytes));
  return Status::ok();
}

Status grow(cuda::HostPinnedBuffer& b, size_t bytes) {
  if (b.bytes() >= bytes || bytes == 0) return Status::ok();
  b = cuda::HostPinnedBuffer();
  LG_ASSIGN_OR_RETURN(b, cuda::HostPinnedBuffer::allocate(bytes));
  return Status::ok();
}

template <class T>
T* as(const cuda::DeviceBuffer& b) {
  return static_cast<T*>(b.get());
}

}  // namespace cuda_runner

using cuda_runner::as;

Result<std::unique_ptr<CudaModelRunner>> CudaModelRunner::load(const ModelDir& model, const RunnerOptions& options) {
  if (options.device.kind != Device::Kind::kCuda) {
    return Status::invalid_argument("the CUDA runner was asked for device " + options.device.name());
  }
  if (options.weight_dtype != WeightType::kBF16) {
    return Status::unsupported("weight dtype " + std::string(weight_type_name(options.weight_dtype)) +
                               " on device " + options.device.name() +
                               ": the CUDA runner holds bf16 weights (dtype bf16); other types run on the CPU");
  }
  if (options.merge != nullptr) {
    return Status::unsupported("device " + options.device.name() +
                               ": the CUDA runner does not merge adapters into its weights; use device cpu");
  }
  const ModelConfig& config = model.config();
  if (config.head_dim % 2 != 0) return Status::unsupported("rotary embedding needs an even head_dim");
  if (config.head_dim > cuda_runner::kMaxHeadDim) {
    return Status::unsupported("head_dim " + std::to_string(config.head_dim) + ": the CUDA runner's attention takes " +
                               std::to_string(cuda_runner::kMaxHeadDim) + " at most");
  }
  const WeightStore& store = model.weights();
  LG_ASSIGN_OR_RETURN(std::optional<WeightType> file_type, quantized_file_type(store));
  if (file_type) {
    return Status::unsupported("'" + model.path() + "' holds weights quantised to " +
                               std::string(weight_type_name(*file_type)) +
                               ": the CUDA runner holds bf16 weights; quantised types run on the CPU");
  }
  // Sized as KvCache::create sizes the CPU pool, so both runners offer the same blocks.
  if (options.kv_block_size <= 0) return Status::invalid_argument("kv block_size must be positive");
  const int64_t per_block = KvCache::bytes_per_block(config, options.kv_block_size);
  const int32_t num_blocks = options.kv_num_blocks > 0 ? options.kv_num_blocks
                                                       : static_cast<int32_t>(options.kv_cache_bytes / per_block);
  if (num_blocks <= 0) {
    return Status::invalid_argument("KV budget of " + std::to_string(options.kv_cache_bytes) +
                                    " bytes holds no block (one block takes " + std::to_string(per_block) + ")");
  }

  auto runner = std::unique_ptr<CudaModelRunner>(new CudaModelRunner());
  runner->config_ = std::move(config);
  runner->device_index_ = options.device.index;
  runner->block_size_ = options.kv_block_size;
  runner->num_blocks_ = num_blocks;
  LG_RETURN_IF_ERROR(cuda::set_device(runner->device_index_));
  LG_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::create());
  runner->stream_ = std::make_shared<cuda::Stream>(std::move(stream));
  LG_ASSIGN_OR_RETURN(runner->lt_, cuda::CublasLt::create());
  LG_RETURN_IF_ERROR(runner->load_weights(store));

  const ModelConfig& c = runner->config_;
  const size_t per_layer = static_cast<size_t>(num_blocks) * static_cast<size_t>(options.kv_block_size) *
                           static_cast<size_t>(c.num_key_value_heads * c.head_dim) * sizeof(float);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    // Not zeroed: attention reads only positions this or an earlier step wrote.
    LG_ASSIGN_OR_RETURN(cuda::DeviceBuffer k, cuda::DeviceBuffer::allocate(per_layer));
    LG_ASSIGN_OR_RETURN(cuda::DeviceBuffer v, cuda::DeviceBuffer::allocate(per_layer));
    runner->k_cache_.push_back(std::move(k));
    runner->v_cache_.push_back(std::move(v));
  }
  runner->inv_freq_ = rope_inv_freq(c);
  return runner;
}

Status CudaModelRunner::load_weights(const WeightStore& store) {
  const ModelConfig& c = config_;
  const cuda::Stream& stream = *stream_;
  LG_ASSIGN_OR_RETURN(const CheckpointLayout layout, checkpoint_layout(c, store));

  LG_ASSIGN_OR_RETURN(const TensorView* embed, store.require(layout.embed.name, layout.embed.shape));
  std::vector<uint16_t> embed_bf16;
  cuda_runner::append_bf16(store, *embed, embed_bf16);
  LG_ASSIGN_OR_RETURN(embed_, cuda_runner::upload(embed_bf16, stream));

  for (const LayerTensors& t : layout.layers) {
    Layer layer;
    LG_ASSIGN_OR_RETURN(const TensorView* in_norm, store.require(t.input_norm.name, t.input_norm.shape));
    LG_ASSIGN_OR_RETURN(const TensorView* post_norm,
                        store.require(t.post_attention_norm.name, t.post_attention_norm.shape));
    LG_ASSIGN_OR_RETURN(layer.input_norm, cuda_runner::upload(cuda_runner::read_f32(store, *in_norm), stream));
    LG_ASSIGN_OR_RETURN(layer.post_attn_norm, cuda_runner::upload(cuda_runner::read_f32(store, *post_norm), stream));
    if (!t.qkv_bias.empty()) {
      std::vector<float> bias;
      for (const TensorRef& ref : t.qkv_bias) {
        LG_ASSIGN_OR_RETURN(const TensorView* b, store.require(ref.name, ref.shape));
        const std::vector<float> part = cuda_runner::read_f32(store, *b);
        bias.insert(bias.end(), part.begin(), part.end());
      }
      LG_ASSIGN_OR_RETURN(layer.qkv_bias, cuda_runner::upload(bias, stream));
    }
    LG_ASSIGN_OR_RETURN(layer.qkv, cuda_runner::upload_stacked(store, {t.qkv.begin(), t.qkv.end()}, stream));
    LG_ASSIGN_OR_RETURN(layer.o, cuda_runner::upload_stacked(store, {t.o}, stream));
    LG_ASSIGN_OR_RETURN(layer.gate_up, cuda_runner::upload_stacked(store, {t.gate_up.begin(), t.gate_up.end()}, stream));
    LG_ASSIGN_OR_RETURN(layer.down, cuda_runner::upload_stacked(store, {t.down}, stream));
    weights_bytes_ += layer.input_norm.bytes() + layer.post_attn_norm.bytes() + layer.qkv_bias.bytes() +
                      layer.qkv.bytes() + layer.o.bytes() + layer.gate_up.bytes() + layer.down.bytes();
    layers_.push_back(std::move(layer));
  }

  LG_ASSIGN_OR_RETURN(const TensorView* norm, store.require(layout.final_norm.name, layout.final_norm.shape));
  LG_ASSIGN_OR_RETURN(final_norm_, cuda_runner::upload(cuda_runner::read_f32(store, *norm), stream));
  if (layout.lm_head_source == LmHeadSource::kOwnTensor) {
    LG_ASSIGN_OR_RETURN(lm_head_, cuda_runner::upload_stacked(store, {layout.lm_head}, stream));
  }  // else tied: the lm_head reads embed_, as the CPU's bf16 lm_head repacks the same table
  weights_bytes_ += embed_.bytes() + final_norm_.bytes() + lm_head_.bytes();
  return Status::ok();
}

CudaModelRunner::~CudaModelRunner() {
  // Nothing may still be reading the buffers freed below.
  if (stream_ != nullptr) (void)stream_->synchronize();
}

KvGeometry CudaModelRunner::kv_geometry() const {
  return {num_blocks_, block_size_, KvCache::bytes_per_block(config_, block_size_)};
}

std::unique_ptr<LoraSlotStore> CudaModelRunner::make_lora_slots(int32_t num_slots, int32_t max_rank) const {
  return std::make_unique<CudaLoraSlots>(config_, num_slots, max_rank, device_index_, stream_);
}

Status CudaModelRunner::grow_workspace(int64_t tokens, int64_t logit_rows, int64_t lora_rank, size_t meta_elements) {
  const ModelConfig& c = config_;
  const auto T = static_cast<size_t>(tokens);
  const auto h = static_cast<size_t>(c.hidden_size), q_out = static_cast<size_t>(c.num_attention_heads * c.head_dim),
             kv_out = static_cast<size_t>(c.num_key_value_heads * c.head_dim),
             inter = static_cast<size_t>(c.intermediate_size);
  constexpr size_t f = sizeof(float);
  LG_RETURN_IF_ERROR(cuda_runner::grow(ws_.hidden, T * h * f));
  LG_RETURN_IF_ERROR(cuda_runner::grow(ws_.normed, T * h * f));
  LG_RETURN_IF_ERROR(cuda_runner::grow(ws_.proj, T * h * f));
  LG_RETURN_IF_ERROR(cuda_runner::grow(ws_.x_bf16, T * std::max({h, q_out, inter}) * sizeof(uint16_t)));
  LG_RETURN_IF_ERROR(cuda_runner::grow(ws_.qkv, T * (q_out + 2 * kv_out) * f));
  LG_RETURN_IF_ERROR(cuda_runner::grow(ws_.attn, T * q_out * f));
  LG_RETURN_IF_ERROR(cuda_runner::grow(ws_.gate_up, T * 2 * inter * f));
  LG_RETURN_IF_ERROR(cuda_runner::grow(ws_.act, T * inter * f));
  LG_RETURN_IF_ERROR(cuda_runner::grow(ws_.lora_h, T * static_cast<size_t>(lora_rank) * f));
  LG_RETURN_IF_ERROR(cuda_runner::grow(ws_.logits, static_cast<size_t>(logit_rows * c.vocab_size) * f));
  LG_RETURN_IF_ERROR(cuda_runner::grow(ws_.meta, meta_elements * 4));
  return cuda_runner::grow(ws_.meta_host, meta_elements * 4);
}

CudaModelRunner::MetaLayout CudaModelRunner::meta_layout(const FlatBatch& f) const {
  MetaLayout m;
  // Each array starts on a 256-byte boundary.
  const auto place = [&m](size_t elements) {
    const size_t at = m.total;
    m.total += (elements + 63) / 64 * 64;
    return at;
  };
  const auto T = static_cast<size_t>(f.num_tokens());
  const size_t half = inv_freq_.size();
  const size_t segments = f.lora_segments.size();
  m.token_ids = place(T);
  m.token_seqs = place(T);
  m.kv_positions = place(T);
  m.block_tables = place(f.block_tables.size());
  m.logits_rows = place(f.logits_rows.size());
  m.seg_slot = place(segments);
  m.seg_begin = place(segments);
  m.seg_end = place(segments);
  m.rope_cos = place(T * half);
  m.rope_sin = place(T * half);
  return m;
}

Status CudaModelRunner::forward(const ForwardBatch& batch, const LoraSlotStore* lora, float* logits) {
  const auto* slots = dynamic_cast<const CudaLoraSlots*>(lora);
  if (lora != nullptr && slots == nullptr) {
    return Status::internal("the CUDA runner was given adapter slots another runner made");
  }
  if (slots != nullptr) LG_RETURN_IF_ERROR(slots->status());
  const ModelConfig& c = config_;
  const int64_t T = batch.num_tokens();
  if (T == 0) return Status::ok();
  // The device cannot report a bad id, so they are checked here, as the CPU model does.
  for (int32_t tok : batch.tokens) {
    if (tok < 0 || tok >= c.vocab_size) {
      return Status::invalid_argument("token id " + std::to_string(tok) + " outside the vocabulary of " +
                                      std::to_string(c.vocab_size));
    }
  }
  if (static_cast<int64_t>(batch.positions.size()) != T) {
    return Status::invalid_argument("a batch of " + std::to_string(T) + " tokens with " +
                                    std::to_string(batch.positions.size()) + " positions");
  }
  for (const ForwardSeq& s : batch.seqs) {
    if (s.logits_begin < 0 || s.num_logits < 0 || s.logits_begin + s.num_logits > s.num_tokens) {
      return Status::invalid_argument("logits rows [" + std::to_string(s.logits_begin) + ", " +
                                      std::to_string(s.logits_begin + s.num_logits) + ") outside a chunk of " +
                                      std::to_string(s.num_tokens) + " tokens");
    }
  }
  const int64_t R = batch.num_logit_rows();
  if (R > 0 && logits == nullptr) return Status::invalid_argument("no host memory for the logits");

  LG_RETURN_IF_ERROR(cuda::set_device(device_index_));
  // Whatever run() queued before an error must finish before the step's
  // buffers (the pinned image above all) are touched again.
  const Status ran = run(batch, slots, logits);
  const Status synced = stream_->synchronize();
  return ran.is_ok() ? synced : ran;
}

Status CudaModelRunner::run(const ForwardBatch& batch, const CudaLoraSlots* slots, float* logits) {
  const ModelConfig& c = config_;
  const FlatBatch f = flatten(batch, block_size_);
  if (f.max_blocks == 0) return Status::invalid_argument("a batch of tokens without sequences");
  const int64_t T = f.num_tokens(), R = static_cast<int64_t>(f.logits_rows.size());
  const int64_t G = static_cast<int64_t>(f.lora_segments.size());
  const int64_t h = c.hidden_size, q_out = c.num_attention_heads * c.head_dim,
                kv_out = c.num_key_value_heads * c.head_dim, qkv_width = q_out + 2 * kv_out,
                inter = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const bool use_lora = slots != nullptr && G > 0;
  const int64_t lora_rank = use_lora ? slots->max_rank() : 0;
  const MetaLayout m = meta_layout(f);
  LG_RETURN_IF_ERROR(grow_workspace(T, R, lora_rank, m.total));
  void* stream = stream_->get();

  // The step's arrays, staged in pinned memory and copied in one go. Tokens
  // no sequence claims (a malformed batch) get position -1: no K/V write and
  // zeros from attention.
  auto* host_i = static_cast<int32_t*>(ws_.meta_host.get());
  auto* host_f = static_cast<float*>(ws_.meta_host.get());
  std::copy(f.token_ids.begin(), f.token_ids.end(), host_i + m.token_ids);
  std::fill_n(host_i + m.token_seqs, T, 0);
  std::fill_n(host_i + m.kv_positions, T, -1);
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const ForwardSeq& s = batch.seqs[i];
    for (int64_t j = 0; j < s.num_tokens; ++j) {
      host_i[m.token_seqs + static_cast<size_t>(s.token_begin + j)] = static_cast<int32_t>(i);
      // K/V go where LlamaModel::attention puts them: at start_pos + j.
      host_i[m.kv_positions + static_cast<size_t>(s.token_begin + j)] = static_cast<int32_t>(s.start_pos + j);
    }
  }
  std::copy(f.block_tables.begin(), f.block_tables.end(), host_i + m.block_tables);
  std::copy(f.logits_rows.begin(), f.logits_rows.end(), host_i + m.logits_rows);
  for (int64_t g = 0; g < G; ++g) {
    const LoraSegmentSpan& span = f.lora_segments[static_cast<size_t>(g)];
    host_i[m.seg_slot + g] = span.slot;
    host_i[m.seg_begin + g] = span.begin;
    host_i[m.seg_end + g] = span.end;
  }
  // RoPE tables from the same code as the CPU's, so both rotate by the same values.
  rope_tables(inv_freq_, batch.positions.data(), static_cast<size_t>(T), host_f + m.rope_cos, host_f + m.rope_sin);
  LG_RETURN_IF_ERROR(cuda::copy_to_device_async(ws_.meta.get(), ws_.meta_host.get(), m.total * 4, stream));

  const int32_t* dev_i = as<int32_t>(ws_.meta);
  const float* dev_f = as<float>(ws_.meta);
  const int32_t* token_seqs = dev_i + m.token_seqs;
  const int32_t* kv_positions = dev_i + m.kv_positions;
  const int32_t* block_tables = dev_i + m.block_tables;
  const cuda::SgmvSegmentsDevice segments{dev_i + m.seg_slot, dev_i + m.seg_begin, dev_i + m.seg_end, G};
  float* hidden = as<float>(ws_.hidden);
  float* normed = as<float>(ws_.normed);
  float* qkv = as<float>(ws_.qkv);
  float* attn = as<float>(ws_.attn);
  float* proj = as<float>(ws_.proj);
  float* gate_up = as<float>(ws_.gate_up);
  float* act = as<float>(ws_.act);
  float* lora_h = as<float>(ws_.lora_h);
  uint16_t* x_bf16 = as<uint16_t>(ws_.x_bf16);

  // y[rows, n] = x[rows, k] · wᵀ: the activations rounded to bf16, for cuBLASLt's bf16 x bf16.
  const auto linear = [&](const float* x, int64_t rows, int64_t k, const cuda::DeviceBuffer& w, int64_t n,
                          float* y) -> Status {
    LG_RETURN_IF_ERROR(cuda::convert_f32_to_bf16(x, x_bf16, rows * k, stream));
    return lt_.gemm_bf16(x_bf16, as<uint16_t>(w), y, rows, n, k, /*accumulate=*/false, stream);
  };
  // y[:, col..] += LoRA(module)(x) for every segment (SGMV shrink, then expand).
  const auto add_lora = [&](int64_t layer, LoraModule module, const float* x, int64_t ldx, float* y,
                            int64_t ldy) -> Status {
    if (!use_lora) return Status::ok();
    const cuda::LoraSlotsDevice w = slots->weights(layer, module);
    LG_RETURN_IF_ERROR(cuda::sgmv_shrink(x, ldx, T, segments, w, lora_h, lora_rank, stream));
    return cuda::sgmv_expand(lora_h, lora_rank, T, segments, w, y, ldy, stream);
  };

  LG_RETURN_IF_ERROR(
      cuda::embedding_bf16(as<uint16_t>(embed_), c.vocab_size, h, dev_i + m.token_ids, T, hidden, stream));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const Layer& lw = layers_[static_cast<size_t>(l)];
    LG_RETURN_IF_ERROR(cuda::rmsnorm(hidden, as<float>(lw.input_norm), normed, T, h, eps, stream));
    LG_RETURN_IF_ERROR(linear(normed, T, h, lw.qkv, qkv_width, qkv));
    if (lw.qkv_bias.get() != nullptr) {
      LG_RETURN_IF_ERROR(cuda::add_bias(qkv, as<float>(lw.qkv_bias), T, qkv_width, qkv_width, stream));
    }
    LG_RETURN_IF_ERROR(add_lora(l, LoraModule::kQ, normed, h, qkv, qkv_width));
    LG_RETURN_IF_ERROR(add_lora(l, LoraModule::kK, normed, h, qkv + q_out, qkv_width));
    LG_RETURN_IF_ERROR(add_lora(l, LoraModule::kV, normed, h, qkv + q_out + kv_out, qkv_width));
    // The q heads and then the k heads lie side by side: one call rotates both, v is left alone.
    LG_RETURN_IF_ERROR(cuda::rope_rotate_half(qkv, T, c.num_attention_heads + c.num_key_value_heads, c.head_dim,
                                              qkv_width, dev_f + m.rope_cos, dev_f + m.rope_sin, stream));
    float* k_cache = as<float>(k_cache_[static_cast<size_t>(l)]);
    float* v_cache = as<float>(v_cache_[static_cast<size_t>(l)]);
    // This step's K/V first: a prefill chunk attends to itself.
    LG_RETURN_IF_ERROR(cuda::kv_cache_write(qkv + q_out, qkv + q_out + kv_out, qkv_width, T, kv_out, token_seqs,
                                            kv_positions, block_tables, f.max_blocks, block_size_, num_blocks_,
                                            k_cache, v_cache, stream));
    const cuda::PagedKvDevice kv{k_cache, v_cache, num_blocks_, block_size_, c.num_key_value_heads, c.head_dim};
    LG_RETURN_IF_ERROR(cuda::paged_attention_varlen(qkv, qkv_width, attn, q_out, T, c.num_attention_heads, kv,
                                                    block_tables, f.max_blocks, token_seqs, kv_positions,
                                                    c.sliding_window, stream));
    LG_RETURN_IF_ERROR(linear(attn, T, q_out, lw.o, h, proj));
    LG_RETURN_IF_ERROR(add_lora(l, LoraModule::kO, attn, q_out, proj, h));
    LG_RETURN_IF_ERROR(cuda::add_inplace(hidden, proj, T * h, stream));

    LG_RETURN_IF_ERROR(cuda::rmsnorm(hidden, as<float>(lw.post_attn_norm), normed, T, h, eps, stream));
    LG_RETURN_IF_ERROR(linear(normed, T, h, lw.gate_up, 2 * inter, gate_up));
    LG_RETURN_IF_ERROR(add_lora(l, LoraModule::kGate, normed, h, gate_up, 2 * inter));
    LG_RETURN_IF_ERROR(add_lora(l, LoraModule::kUp, normed, h, gate_up + inter, 2 * inter));
    LG_RETURN_IF_ERROR(cuda::silu_mul(gate_up, act, T, inter, stream));
    LG_RETURN_IF_ERROR(linear(act, T, inter, lw.down, h, proj));
    LG_RETURN_IF_ERROR(add_lora(l, LoraModule::kDown, act, inter, proj, h));
    LG_RETURN_IF_ERROR(cuda::add_inplace(hidden, proj, T * h, stream));
  }
  if (R == 0) return Status::ok();

  // The wanted rows only, gathered in order, normed, then one lm_head product over all of them.
  LG_RETURN_IF_ERROR(cuda::gather_rows(hidden, h, T, dev_i + m.logits_rows, R, h, proj, stream));
  LG_RETURN_IF_ERROR(cuda::rmsnorm(proj, as<float>(final_norm_), normed, R, h, eps, stream));
  LG_RETURN_IF_ERROR(linear(normed, R, h, lm_head_.get() != nullptr ? lm_head_ : embed_, c.vocab_size,
                            as<float>(ws_.logits)));
  return cuda::copy_to_host_async(logits, ws_.logits.get(),
                                  static_cast<size_t>(R * c.vocab_size) * sizeof(float), stream);
}

}  // namespace loragate
