// The GGUF writer of `bench decode --compare-llamacpp`: a tiny Llama model
// written as GGUF and read back by a reader written here from the format
// (header, metadata, tensor infos, alignment), its Q4_0, Q8_0 and BF16
// blocks decoded as ggml decodes them, and the q/k rotary row order.
#include "bench/llama_gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/gguf_writer.h"
#include "common/dtype.h"
#include "model/model_config.h"
#include "model/safetensors.h"
#include "model/synth_model.h"
#include "tests/test_util.h"

namespace loragate::bench {
namespace {

namespace fs = std::filesystem;

// --- A GGUF reader, independent of the writer ------------------------------

struct GgufTensorInfo {
  std::vector<uint64_t> dims;
  uint32_t type = 0;
  uint64_t offset = 0;
};

struct GgufValue {
  uint32_t type = 0;
  uint64_t u = 0;              // unsigned integer types
  float f = 0;                 // FLOAT32
  std::string s;               // STRING
  uint32_t array_type = 0;     // ARRAY
  uint64_t array_size = 0;
  std::vector<std::string> strings;  // an array of strings
};

struct GgufFile {
  uint32_t version = 0;
  uint64_t tensor_count = 0, metadata_count = 0;
  std::map<std::string, GgufValue> metadata;
  std::map<std::string, GgufTensorInfo> tensors;
  uint64_t data_start = 0;
  std::string bytes;
};

class Cursor {
 public:
  explicit Cursor(const std::string& b) : b_(b) {}
  template <typename T>
  T get() {
    if (at_ + sizeof(T) > b_.size()) throw std::runtime_error("read past the end of the file");
    T v;
    std::memcpy(&v, b_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::string string() {
    const uint64_t n = get<uint64_t>();
    if (at_ + n > b_.size()) throw std::runtime_error("string past the end of the file");
    std::string s = b_.substr(at_, n);
    at_ += n;
    return s;
  }
  void skip(uint64_t n) { at_ += n; }
  uint64_t at() const { return at_; }

 private:
  const std::string& b_;
  uint64_t at_ = 0;
};

// Sizes of the scalar value types (gguf_type), 0 for STRING and ARRAY.
uint64_t scalar_size(uint32_t type) {
  switch (type) {
    case 0: case 1: case 7: return 1;   // u8, i8, bool
    case 2: case 3: return 2;           // u16, i16
    case 4: case 5: case 6: return 4;   // u32, i32, f32
    case 10: case 11: case 12: return 8;  // u64, i64, f64
    default: return 0;
  }
}

GgufFile read_gguf(const std::string& path) {
  GgufFile g;
  std::ifstream in(path, std::ios::binary);
  g.bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  Cursor c(g.bytes);
  if (c.get<uint32_t>() != 0x46554747u) throw std::runtime_error("no GGUF magic");  // "GGUF" little-endian
  g.version = c.get<uint32_t>();
  g.tensor_count = c.get<uint64_t>();
  g.metadata_count = c.get<uint64_t>();
  for (uint64_t i = 0; i < g.metadata_count; ++i) {
    const std::string key = c.string();
    GgufValue v;
    v.type = c.get<uint32_t>();
    if (v.type == 8) {
      v.s = c.string();
    } else if (v.type == 9) {
      v.array_type = c.get<uint32_t>();
      v.array_size = c.get<uint64_t>();
      for (uint64_t k = 0; k < v.array_size; ++k) {
        if (v.array_type == 8) v.strings.push_back(c.string());
        else c.skip(scalar_size(v.array_type));
      }
    } else if (v.type == 6) {
      v.f = c.get<float>();
    } else if (v.type == 4) {
      v.u = c.get<uint32_t>();
    } else {
      c.skip(scalar_size(v.type));
    }
    g.metadata[key] = v;
  }
  for (uint64_t i = 0; i < g.tensor_count; ++i) {
    const std::string name = c.string();
    GgufTensorInfo t;
    const uint32_t n_dims = c.get<uint32_t>();
    for (uint32_t d = 0; d < n_dims; ++d) t.dims.push_back(c.get<uint64_t>());
    t.type = c.get<uint32_t>();
    t.offset = c.get<uint64_t>();
    g.tensors[name] = t;
  }
  g.data_start = (c.at() + 31) / 32 * 32;
  return g;
}

// Row `r` of a 2-D tensor, decoded as ggml decodes its type.
std::vector<float> decode_row(const GgufFile& g, const std::string& name, uint64_t r) {
  const GgufTensorInfo& t = g.tensors.at(name);
  const uint64_t n = t.dims[0];
  std::vector<float> out(n);
  const uint8_t* base = reinterpret_cast<const uint8_t*>(g.bytes.data()) + g.data_start + t.offset;
  if (t.type == 2) {  // Q4_0: f16 d, 16 bytes; byte j = value j (low nibble), value j + 16 (high)
    const uint8_t* row = base + r * (n / 32) * 18;
    for (uint64_t b = 0; b < n / 32; ++b) {
      const uint8_t* block = row + b * 18;
      uint16_t d16;
      std::memcpy(&d16, block, 2);
      const float d = f16_to_f32(d16);
      for (int j = 0; j < 16; ++j) {
        out[b * 32 + j] = d * static_cast<float>((block[2 + j] & 0x0f) - 8);
        out[b * 32 + j + 16] = d * static_cast<float>((block[2 + j] >> 4) - 8);
      }
    }
  } else if (t.type == 8) {  // Q8_0: f16 d, 32 int8
    const uint8_t* row = base + r * (n / 32) * 34;
    for (uint64_t b = 0; b < n / 32; ++b) {
      const uint8_t* block = row + b * 34;
      uint16_t d16;
      std::memcpy(&d16, block, 2);
      for (int j = 0; j < 32; ++j) out[b * 32 + j] = f16_to_f32(d16) * static_cast<int8_t>(block[2 + j]);
    }
  } else if (t.type == 30) {  // BF16
    for (uint64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, base + (r * n + i) * 2, 2);
      out[i] = bf16_to_f32(h);
    }
  } else if (t.type == 0) {  // F32
    std::memcpy(out.data(), base + r * n * 4, n * 4);
  }
  return out;
}

// The half step of each 32-value block of a Q4_0 row: d / 2.
std::vector<float> q4_0_half_steps(const GgufFile& g, const std::string& name, uint64_t r) {
  const GgufTensorInfo& t = g.tensors.at(name);
  const uint8_t* row = reinterpret_cast<const uint8_t*>(g.bytes.data()) + g.data_start + t.offset +
                       r * (t.dims[0] / 32) * 18;
  std::vector<float> half;
  for (uint64_t b = 0; b < t.dims[0] / 32; ++b) {
    uint16_t d16;
    std::memcpy(&d16, row + b * 18, 2);
    half.push_back(f16_to_f32(d16) / 2);
  }
  return half;
}

// --- The tiny model --------------------------------------------------------

// The tiny preset with an intermediate size Q4_0 can hold (176 is not a
// multiple of 32), 320 tokens (room for the 256 byte tokens), one layer.
ModelConfig tiny_config() {
  ModelConfig c = synth_preset_config("tiny").value();
  c.intermediate_size = 128;
  c.vocab_size = 320;
  c.num_hidden_layers = 1;
  return c;
}

// A value no two tensors share, of the size of real weights.
float weight_value(size_t tensor, size_t i) { return 0.05f * std::sin(0.37f * i + 1.3f * tensor) + 0.001f * tensor; }

std::vector<uint8_t> f32_bytes(size_t tensor, size_t n) {
  std::vector<uint8_t> b(n * 4);
  for (size_t i = 0; i < n; ++i) {
    const float v = weight_value(tensor, i);
    std::memcpy(b.data() + i * 4, &v, 4);
  }
  return b;
}

void write_model(const std::string& dir, const ModelConfig& c) {
  fs::create_directories(dir);
  std::ofstream(fs::path(dir) / "config.json") << c.to_json();
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim,
                f = c.intermediate_size;
  std::vector<std::pair<std::string, std::vector<int64_t>>> specs = {
      {"model.embed_tokens.weight", {c.vocab_size, h}},
      {"model.norm.weight", {h}},
      {"lm_head.weight", {c.vocab_size, h}}};
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    specs.push_back({p + "input_layernorm.weight", {h}});
    specs.push_back({p + "self_attn.q_proj.weight", {q, h}});
    specs.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    specs.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    specs.push_back({p + "self_attn.o_proj.weight", {h, q}});
    specs.push_back({p + "post_attention_layernorm.weight", {h}});
    specs.push_back({p + "mlp.gate_proj.weight", {f, h}});
    specs.push_back({p + "mlp.up_proj.weight", {f, h}});
    specs.push_back({p + "mlp.down_proj.weight", {h, f}});
  }
  std::vector<TensorData> tensors;
  for (size_t i = 0; i < specs.size(); ++i) {
    size_t n = 1;
    for (int64_t d : specs[i].second) n *= static_cast<size_t>(d);
    tensors.push_back({specs[i].first, DType::kF32, specs[i].second, f32_bytes(i, n)});
  }
  ASSERT_TRUE(write_safetensors((fs::path(dir) / "model.safetensors").string(), tensors).is_ok());
}

class LlamaGgufTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = loragate::testing::make_temp_dir("lg-gguf");
    ASSERT_FALSE(root_.empty());
    model_ = (fs::path(root_) / "tiny").string();
    write_model(model_, config_);
    store_ = WeightStore::open_dir(model_).value();
  }
  void TearDown() override {
    store_.reset();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  GgufFile write_and_read(GgmlType type) {
    const std::string path = (fs::path(root_) / "m.gguf").string();
    Status s = write_llama_gguf(model_, type, path);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return read_gguf(path);
  }
  // Row `r` of HF tensor `name` as f32.
  std::vector<float> hf_row(const std::string& name, int64_t r) {
    const TensorView* t = store_->find(name);
    const int64_t cols = t->shape.back();
    std::vector<float> out(static_cast<size_t>(cols));
    std::memcpy(out.data(), t->data + r * cols * 4, out.size() * 4);
    return out;
  }

  ModelConfig config_ = tiny_config();
  std::string root_, model_;
  std::unique_ptr<WeightStore> store_;
};

TEST_F(LlamaGgufTest, HeaderMetadataAndTensorInfosAreWhatLlamaCppReads) {
  const GgufFile g = write_and_read(GgmlType::kQ4_0);
  EXPECT_EQ(g.version, 3u);
  EXPECT_EQ(g.metadata_count, g.metadata.size());  // every key read once, none repeated
  EXPECT_EQ(g.tensor_count, 3u + 9u * config_.num_hidden_layers);
  EXPECT_EQ(g.tensors.size(), g.tensor_count);

  EXPECT_EQ(g.metadata.at("general.architecture").s, "llama");
  EXPECT_EQ(g.metadata.at("general.alignment").u, 32u);
  EXPECT_EQ(g.metadata.at("general.file_type").u, 2u);  // LLAMA_FTYPE_MOSTLY_Q4_0
  const std::map<std::string, int64_t> u32_keys = {
      {"llama.context_length", config_.max_position_embeddings},
      {"llama.embedding_length", config_.hidden_size},
      {"llama.block_count", config_.num_hidden_layers},
      {"llama.feed_forward_length", config_.intermediate_size},
      {"llama.attention.head_count", config_.num_attention_heads},
      {"llama.attention.head_count_kv", config_.num_key_value_heads},
      {"llama.rope.dimension_count", config_.head_dim},
      {"llama.vocab_size", config_.vocab_size}};
  for (const auto& [key, want] : u32_keys) {
    ASSERT_TRUE(g.metadata.count(key)) << key;
    EXPECT_EQ(g.metadata.at(key).type, 4u) << key << " must be UINT32, llama.cpp checks the type";
    EXPECT_EQ(g.metadata.at(key).u, static_cast<uint64_t>(want)) << key;
  }
  EXPECT_EQ(g.metadata.at("llama.rope.freq_base").type, 6u);
  EXPECT_FLOAT_EQ(g.metadata.at("llama.rope.freq_base").f, static_cast<float>(config_.rope_theta));
  EXPECT_FLOAT_EQ(g.metadata.at("llama.attention.layer_norm_rms_epsilon").f, static_cast<float>(config_.rms_norm_eps));

  EXPECT_EQ(g.metadata.at("tokenizer.ggml.model").s, "llama");
  const GgufValue& tokens = g.metadata.at("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.strings.size(), static_cast<size_t>(config_.vocab_size));
  EXPECT_EQ(tokens.strings[1], "<s>");
  EXPECT_EQ(tokens.strings[3 + '\n'], "<0x0A>");  // llama.cpp looks its newline token up by this name
  EXPECT_EQ(std::set<std::string>(tokens.strings.begin(), tokens.strings.end()).size(), tokens.strings.size());
  EXPECT_EQ(g.metadata.at("tokenizer.ggml.scores").array_size, static_cast<uint64_t>(config_.vocab_size));
  EXPECT_EQ(g.metadata.at("tokenizer.ggml.token_type").array_type, 5u);  // INT32
  EXPECT_EQ(g.metadata.at("tokenizer.ggml.token_type").array_size, static_cast<uint64_t>(config_.vocab_size));

  const uint64_t h = config_.hidden_size, f = config_.intermediate_size;
  const uint64_t q = config_.num_attention_heads * config_.head_dim;
  const uint64_t kv = config_.num_key_value_heads * config_.head_dim;
  const std::map<std::string, std::pair<std::vector<uint64_t>, uint32_t>> want = {
      {"token_embd.weight", {{h, uint64_t(config_.vocab_size)}, 2}}, {"output_norm.weight", {{h}, 0}},
      {"output.weight", {{h, uint64_t(config_.vocab_size)}, 2}},    {"blk.0.attn_norm.weight", {{h}, 0}},
      {"blk.0.attn_q.weight", {{h, q}, 2}},                          {"blk.0.attn_k.weight", {{h, kv}, 2}},
      {"blk.0.attn_v.weight", {{h, kv}, 2}},                         {"blk.0.attn_output.weight", {{q, h}, 2}},
      {"blk.0.ffn_norm.weight", {{h}, 0}},                           {"blk.0.ffn_gate.weight", {{h, f}, 2}},
      {"blk.0.ffn_up.weight", {{h, f}, 2}},                          {"blk.0.ffn_down.weight", {{f, h}, 2}}};
  for (const auto& [name, dims_type] : want) {
    ASSERT_TRUE(g.tensors.count(name)) << name;
    EXPECT_EQ(g.tensors.at(name).dims, dims_type.first) << name;
    EXPECT_EQ(g.tensors.at(name).type, dims_type.second) << name;
    EXPECT_EQ(g.tensors.at(name).offset % 32, 0u) << name << " is not aligned";
  }
  EXPECT_EQ(g.data_start % 32, 0u);
  // The data section holds every tensor, each padded to the alignment.
  uint64_t end = 0;
  for (const auto& [name, t] : g.tensors) {
    uint64_t n = 1;
    for (uint64_t d : t.dims) n *= d;
    const uint64_t bytes = t.type == 0 ? n * 4 : n / 32 * 18;
    end = std::max(end, t.offset + (bytes + 31) / 32 * 32);
  }
  EXPECT_EQ(g.data_start + end, g.bytes.size());
}

TEST_F(LlamaGgufTest, Q4_0ValuesComeBackWithinHalfAStep) {
  const GgufFile g = write_and_read(GgmlType::kQ4_0);
  for (int64_t r = 0; r < config_.num_key_value_heads * config_.head_dim; ++r) {
    const std::vector<float> want = hf_row("model.layers.0.self_attn.v_proj.weight", r);
    const std::vector<float> got = decode_row(g, "blk.0.attn_v.weight", r);
    const std::vector<float> half = q4_0_half_steps(g, "blk.0.attn_v.weight", r);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_LE(std::fabs(got[i] - want[i]), half[i / 32] * 1.001f + 1e-9f) << "row " << r << " value " << i;
    }
  }
}

// Row `gguf_row` of `gguf_name` holds the values `want`, to bf16's precision.
void expect_same_row(const GgufFile& g, const std::string& gguf_name, int64_t gguf_row,
                     const std::vector<float>& want) {
  const std::vector<float> got = decode_row(g, gguf_name, gguf_row);
  for (size_t k = 0; k < want.size(); ++k) {
    ASSERT_NEAR(got[k], want[k], std::fabs(want[k]) / 128 + 1e-7f) << gguf_name << " row " << gguf_row;
  }
}

TEST_F(LlamaGgufTest, QAndKRowsAreInLlamaCppsRotaryPairOrder) {
  const GgufFile g = write_and_read(GgmlType::kBF16);  // bf16: each row is recognisable to 3 digits
  const int64_t d = config_.head_dim;
  // GGUF row h*d + 2i + j is HF row h*d + j*d/2 + i; k has its own number of heads.
  const std::vector<std::pair<const char*, int64_t>> rotated = {{"q", config_.num_attention_heads},
                                                                {"k", config_.num_key_value_heads}};
  for (const auto& [which, heads] : rotated) {
    const std::string hf = std::string("model.layers.0.self_attn.") + which + "_proj.weight";
    const std::string gguf = std::string("blk.0.attn_") + which + ".weight";
    for (int64_t head = 0; head < heads; ++head) {
      for (int64_t i = 0; i < d / 2; ++i) {
        for (int64_t j = 0; j < 2; ++j) {
          expect_same_row(g, gguf, head * d + 2 * i + j, hf_row(hf, head * d + j * d / 2 + i));
        }
      }
    }
  }
  EXPECT_EQ(hf_row_of_gguf_rope_row(1, 16), 8);
  EXPECT_EQ(hf_row_of_gguf_rope_row(16 + 2, 16), 16 + 1);
  // v is not rotated: its rows keep their order.
  expect_same_row(g, "blk.0.attn_v.weight", 1, hf_row("model.layers.0.self_attn.v_proj.weight", 1));
}

TEST_F(LlamaGgufTest, Q8_0ValuesComeBackWithinHalfAStep) {
  const GgufFile g = write_and_read(GgmlType::kQ8_0);
  EXPECT_EQ(g.metadata.at("general.file_type").u, 7u);  // LLAMA_FTYPE_MOSTLY_Q8_0
  const std::vector<float> want = hf_row("model.layers.0.mlp.down_proj.weight", 3);
  const std::vector<float> got = decode_row(g, "blk.0.ffn_down.weight", 3);
  for (size_t b = 0; b < want.size() / 32; ++b) {
    float amax = 0;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(want[b * 32 + i]));
    for (size_t i = 0; i < 32; ++i) ASSERT_LE(std::fabs(got[b * 32 + i] - want[b * 32 + i]), amax / 127 / 2 * 1.01f);
  }
}

TEST_F(LlamaGgufTest, RefusesABlockTypeForSizesNotAMultipleOf32) {
  ModelConfig odd = config_;
  odd.intermediate_size = 176;
  const std::string dir = (fs::path(root_) / "odd").string();
  write_model(dir, odd);
  const std::string path = (fs::path(root_) / "odd.gguf").string();
  Status s = write_llama_gguf(dir, GgmlType::kQ4_0, path);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("intermediate_size"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".partial"));
  EXPECT_TRUE(write_llama_gguf(dir, GgmlType::kBF16, path).is_ok());  // a float type has no blocks to fill
}

}  // namespace
}  // namespace loragate::bench
