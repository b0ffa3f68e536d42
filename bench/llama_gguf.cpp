#include "bench/llama_gguf.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "bench/gguf_writer.h"
#include "common/dtype.h"
#include "model/checkpoint.h"
#include "model/model_config.h"
#include "model/safetensors.h"

namespace loragate::bench {
namespace {

// Token ids of the placeholder vocabulary: SentencePiece's usual specials
// first, where llama.cpp's "llama" tokenizer expects them by default.
constexpr int32_t kUnkId = 0, kBosId = 1, kEosId = 2;
// llama_token_type values of the placeholder vocabulary.
constexpr int32_t kNormalToken = 1, kUnknownToken = 2, kControlToken = 3, kByteToken = 6;

// The <0xNN> byte tokens let llama.cpp find its newline token; a vocabulary
// too small for them gets a warning from llama.cpp, nothing worse.
void add_placeholder_tokenizer(GgufWriter& gguf, int64_t vocab_size) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  auto add = [&](std::string text, int32_t type) {
    tokens.push_back(std::move(text));
    types.push_back(type);
  };
  add("<unk>", kUnknownToken);
  add("<s>", kControlToken);
  add("</s>", kControlToken);
  for (int b = 0; b < 256 && static_cast<int64_t>(tokens.size()) < vocab_size; ++b) {
    char text[8];
    std::snprintf(text, sizeof text, "<0x%02X>", b);
    add(text, kByteToken);
  }
  while (static_cast<int64_t>(tokens.size()) < vocab_size) add("tok_" + std::to_string(tokens.size()), kNormalToken);
  tokens.resize(static_cast<size_t>(vocab_size));  // a vocabulary under 3 tokens (never a real model)
  types.resize(tokens.size());

  gguf.add_string("tokenizer.ggml.model", "llama");
  gguf.add_string_array("tokenizer.ggml.tokens", tokens);
  gguf.add_f32_array("tokenizer.ggml.scores", std::vector<float>(tokens.size(), 0.0f));
  gguf.add_i32_array("tokenizer.ggml.token_type", types);
  gguf.add_u32("tokenizer.ggml.unknown_token_id", kUnkId);
  gguf.add_u32("tokenizer.ggml.bos_token_id", kBosId);
  gguf.add_u32("tokenizer.ggml.eos_token_id", kEosId);
}

void add_llama_hparams(GgufWriter& gguf, const ModelConfig& c, const std::string& name, GgmlType matrix_type) {
  gguf.add_string("general.architecture", "llama");
  gguf.add_string("general.name", name);
  gguf.add_u32("general.file_type", llama_file_type(matrix_type));
  gguf.add_u32("llama.context_length", static_cast<uint32_t>(c.max_position_embeddings));
  gguf.add_u32("llama.embedding_length", static_cast<uint32_t>(c.hidden_size));
  gguf.add_u32("llama.block_count", static_cast<uint32_t>(c.num_hidden_layers));
  gguf.add_u32("llama.feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  gguf.add_u32("llama.attention.head_count", static_cast<uint32_t>(c.num_attention_heads));
  gguf.add_u32("llama.attention.head_count_kv", static_cast<uint32_t>(c.num_key_value_heads));
  gguf.add_u32("llama.attention.key_length", static_cast<uint32_t>(c.head_dim));
  gguf.add_u32("llama.attention.value_length", static_cast<uint32_t>(c.head_dim));
  gguf.add_u32("llama.rope.dimension_count", static_cast<uint32_t>(c.head_dim));
  gguf.add_f32("llama.rope.freq_base", static_cast<float>(c.rope_theta));
  gguf.add_f32("llama.attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  gguf.add_u32("llama.vocab_size", static_cast<uint32_t>(c.vocab_size));
  // Rope scaling (linear, llama3) is left out: llama3's needs a rope_freqs
  // tensor, and neither changes the work per token this file is written to time.
}

// The bytes of HF tensor `t` ([rows, cols] or [n]) encoded as `type`, a row
// at a time from the mapped file; a `rope_head_dim` > 0 puts the rows in llama.cpp's
// rotary order (hf_row_of_gguf_rope_row) with heads of `head_dim`.
Result<std::vector<uint8_t>> encode_tensor(const WeightStore& store, const TensorView& t, GgmlType type,
                                           int64_t rope_head_dim) {
  const int64_t cols = t.shape.back();
  const int64_t rows = t.numel() / cols;
  const size_t in_row_bytes = static_cast<size_t>(cols) * dtype_size(t.dtype);
  const size_t out_row_bytes = ggml_row_bytes(type, cols);
  std::vector<float> row_values(static_cast<size_t>(cols));
  std::vector<uint8_t> out(out_row_bytes * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t from = rope_head_dim > 0 ? hf_row_of_gguf_rope_row(r, rope_head_dim) : r;
    convert_to_f32(t.dtype, t.data + static_cast<size_t>(from) * in_row_bytes, row_values.data(), row_values.size());
    encode_ggml_row(type, row_values.data(), cols, out.data() + static_cast<size_t>(r) * out_row_bytes);
  }
  store.release(t.data, t.nbytes);
  return out;
}

// Declares HF tensor `hf_name` of `shape` as GGUF tensor `gguf_name`; its
// bytes are read and encoded when the file is written.
Status add_tensor(GgufWriter& gguf, const WeightStore& store, const std::string& hf_name,
                  const std::vector<int64_t>& shape, const std::string& gguf_name, GgmlType type,
                  int64_t rope_head_dim = 0) {
  LG_ASSIGN_OR_RETURN(const TensorView* t, store.require(hf_name, shape));
  const std::vector<int64_t> dims(shape.rbegin(), shape.rend());  // GGUF lists the innermost dimension first
  return gguf.add_tensor(gguf_name, dims, type,
                         [&store, t, type, rope_head_dim] { return encode_tensor(store, *t, type, rope_head_dim); });
}

Status check_convertible(const ModelConfig& c, GgmlType matrix_type, const std::string& model_dir) {
  if (c.attention_bias) {
    return Status::unsupported(model_dir + ": " + c.architecture +
                               " has attention biases, which llama.cpp's llama architecture lacks");
  }
  if (is_block_quantised(matrix_type)) {
    const int64_t q_out = c.num_attention_heads * c.head_dim;
    const std::pair<const char*, int64_t> sizes[] = {{"hidden_size", c.hidden_size},
                                                     {"intermediate_size", c.intermediate_size},
                                                     {"num_attention_heads * head_dim", q_out}};
    for (const auto& [key, size] : sizes) {
      if (size % kGgmlBlockValues != 0) {
        return Status::unsupported(model_dir + ": " + std::string(ggml_type_name(matrix_type)) + " needs " + key +
                                   " to be a multiple of " + std::to_string(kGgmlBlockValues) + ", it is " +
                                   std::to_string(size));
      }
    }
  }
  return Status::ok();
}

}  // namespace

uint32_t llama_file_type(GgmlType matrix_type) {
  switch (matrix_type) {
    case GgmlType::kF32: return 0;   // LLAMA_FTYPE_ALL_F32
    case GgmlType::kF16: return 1;   // LLAMA_FTYPE_MOSTLY_F16
    case GgmlType::kQ4_0: return 2;  // LLAMA_FTYPE_MOSTLY_Q4_0
    case GgmlType::kQ8_0: return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    case GgmlType::kBF16: return 32; // LLAMA_FTYPE_MOSTLY_BF16
  }
  return 0;
}

int64_t hf_row_of_gguf_rope_row(int64_t row, int64_t head_dim) {
  const int64_t head = row / head_dim, within = row % head_dim;
  const int64_t pair = within / 2, member = within % 2;
  return head * head_dim + member * (head_dim / 2) + pair;
}

Status write_llama_gguf(const std::string& model_dir, GgmlType matrix_type, const std::string& out_path) {
  LG_ASSIGN_OR_RETURN(const ModelConfig c, ModelConfig::load(model_dir));
  LG_RETURN_IF_ERROR(check_convertible(c, matrix_type, model_dir));
  LG_ASSIGN_OR_RETURN(std::unique_ptr<WeightStore> store, WeightStore::open_dir(model_dir));
  LG_ASSIGN_OR_RETURN(const CheckpointLayout layout, checkpoint_layout(c, *store));

  GgufWriter gguf;
  add_llama_hparams(gguf, c, std::filesystem::path(model_dir).filename().string(), matrix_type);
  add_placeholder_tokenizer(gguf, c.vocab_size);

  const WeightStore& s = *store;
  LG_RETURN_IF_ERROR(add_tensor(gguf, s, layout.embed.name, layout.embed.shape, "token_embd.weight", matrix_type));
  for (size_t l = 0; l < layout.layers.size(); ++l) {
    const LayerTensors& t = layout.layers[l];
    const std::string blk = "blk." + std::to_string(l) + ".";
    auto linear = [&](const LinearTensor& lt, const char* name, int64_t rope_head_dim = 0) {
      return add_tensor(gguf, s, lt.name, {lt.rows, lt.cols}, blk + name, matrix_type, rope_head_dim);
    };
    LG_RETURN_IF_ERROR(add_tensor(gguf, s, t.input_norm.name, t.input_norm.shape, blk + "attn_norm.weight",
                                  GgmlType::kF32));
    // q and k rows go into llama.cpp's rotary pair order (hf_row_of_gguf_rope_row):
    // timing alone would not need it, but the file then computes what the model does.
    LG_RETURN_IF_ERROR(linear(t.qkv[0], "attn_q.weight", c.head_dim));
    LG_RETURN_IF_ERROR(linear(t.qkv[1], "attn_k.weight", c.head_dim));
    LG_RETURN_IF_ERROR(linear(t.qkv[2], "attn_v.weight"));
    LG_RETURN_IF_ERROR(linear(t.o, "attn_output.weight"));
    LG_RETURN_IF_ERROR(add_tensor(gguf, s, t.post_attention_norm.name, t.post_attention_norm.shape,
                                  blk + "ffn_norm.weight", GgmlType::kF32));
    LG_RETURN_IF_ERROR(linear(t.gate_up[0], "ffn_gate.weight"));
    LG_RETURN_IF_ERROR(linear(t.gate_up[1], "ffn_up.weight"));
    LG_RETURN_IF_ERROR(linear(t.down, "ffn_down.weight"));
  }
  LG_RETURN_IF_ERROR(
      add_tensor(gguf, s, layout.final_norm.name, layout.final_norm.shape, "output_norm.weight", GgmlType::kF32));
  // A tied lm_head has no tensor of its own: llama.cpp then reuses token_embd, as loragate does.
  if (layout.lm_head_source == LmHeadSource::kOwnTensor) {
    LG_RETURN_IF_ERROR(add_tensor(gguf, s, layout.lm_head.name, {layout.lm_head.rows, layout.lm_head.cols},
                                  "output.weight", matrix_type));
  }
  return gguf.write(out_path);
}

}  // namespace loragate::bench
