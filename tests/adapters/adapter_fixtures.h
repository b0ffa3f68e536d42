// Fixtures for the adapter tests: a tiny Llama shape, PEFT configs and
// synthetic adapter directories written with write_safetensors.
#pragma once

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "adapters/lora_module.h"
#include "common/dtype.h"
#include "model/model_config.h"
#include "model/safetensors.h"

namespace loragate::testing {

// hidden 8, intermediate 12, 2 layers, 2 heads of 4, 1 KV head:
// q 8->8, k/v 8->4, o 8->8, gate/up 8->12, down 12->8.
inline ModelConfig tiny_base() {
  ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.model_type = "llama";
  c.hidden_size = 8;
  c.intermediate_size = 12;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 4;
  c.vocab_size = 32;
  return c;
}

inline nlohmann::json lora_config(int64_t r, double alpha, const std::vector<std::string>& targets) {
  return {{"peft_type", "LORA"},   {"task_type", "CAUSAL_LM"}, {"r", r},
          {"lora_alpha", alpha},   {"lora_dropout", 0.05},     {"bias", "none"},
          {"target_modules", targets}, {"use_rslora", false},  {"use_dora", false},
          {"fan_in_fan_out", false},   {"modules_to_save", nullptr},
          {"base_model_name_or_path", "tiny"}, {"inference_mode", true},
          {"init_lora_weights", true}, {"revision", nullptr}};
}

inline std::string lora_key(int64_t layer, LoraModule m, bool is_a) {
  return "base_model.model." + lora_module_path(layer, m) + (is_a ? ".lora_A.weight" : ".lora_B.weight");
}

// The value written at element `i` of the A (or B) of (layer, m): distinct per
// tensor and exactly representable in bf16 and f16.
inline float fake_value(int64_t layer, LoraModule m, bool is_a, size_t i) {
  const int v = static_cast<int>((i * 7 + static_cast<size_t>(layer) * 13 +
                                  static_cast<size_t>(lora_module_index(m)) * 5 + (is_a ? 0 : 3)) %
                                 31) - 15;
  return static_cast<float>(v) / 8.0f;
}

inline TensorData make_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                              const std::vector<float>& values) {
  TensorData t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes.resize(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(t.bytes.data() + 4 * i, &values[i], 4);
    } else {
      const uint16_t h = dtype == DType::kBF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
      std::memcpy(t.bytes.data() + 2 * i, &h, 2);
    }
  }
  return t;
}

// The A [rank, in] or B [out, rank] of (layer, m), filled with fake_value.
inline TensorData fake_lora(const ModelConfig& base, int64_t layer, LoraModule m, bool is_a,
                            int64_t rank, DType dtype = DType::kF32) {
  const int64_t in = in_features(m, base), out = out_features(m, base);
  std::vector<int64_t> shape = is_a ? std::vector<int64_t>{rank, in} : std::vector<int64_t>{out, rank};
  std::vector<float> values(static_cast<size_t>(shape[0] * shape[1]));
  for (size_t i = 0; i < values.size(); ++i) values[i] = fake_value(layer, m, is_a, i);
  return make_tensor(lora_key(layer, m, is_a), dtype, std::move(shape), values);
}

// A and B for `modules` in every layer of `base`, at `rank`.
inline std::vector<TensorData> fake_adapter(const ModelConfig& base, const std::vector<LoraModule>& modules,
                                            int64_t rank, DType dtype = DType::kF32) {
  std::vector<TensorData> out;
  for (int64_t layer = 0; layer < base.num_hidden_layers; ++layer) {
    for (LoraModule m : modules) {
      out.push_back(fake_lora(base, layer, m, true, rank, dtype));
      out.push_back(fake_lora(base, layer, m, false, rank, dtype));
    }
  }
  return out;
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Writes `dir`/adapter_config.json and `dir`/adapter_model.safetensors.
inline Status write_adapter(const std::string& dir, const nlohmann::json& config,
                            const std::vector<TensorData>& tensors) {
  write_text(dir + "/adapter_config.json", config.dump(2));
  return write_safetensors(dir + "/adapter_model.safetensors", tensors);
}

}  // namespace loragate::testing
