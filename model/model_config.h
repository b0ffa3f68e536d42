// ModelConfig: a Llama-family model's shape and hyper-parameters, read from
// Hugging Face config.json (and generation_config.json for eos ids).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace loragate {

enum class RopeScalingType { kNone, kLinear, kLlama3 };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;                             // linear and llama3
  double low_freq_factor = 1.0;                    // llama3
  double high_freq_factor = 4.0;                   // llama3
  int64_t original_max_position_embeddings = 8192; // llama3

  bool operator==(const RopeScaling&) const = default;
};

struct ModelConfig {
  std::string architecture;      // "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"
  std::string model_type;        // "llama", "mistral", "qwen2"
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // defaults to num_attention_heads
  int64_t head_dim = 0;             // defaults to hidden_size / num_attention_heads
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  int64_t sliding_window = 0;       // 0 = none (Mistral sets it; Qwen2 only with use_sliding_window)
  bool attention_bias = false;      // q/k/v biases (Qwen2 has them always)
  int32_t bos_token_id = -1;        // -1 = none
  std::vector<int32_t> eos_token_ids;  // config.json, extended by generation_config.json

  // Reads `dir`/config.json and, when present, `dir`/generation_config.json.
  // Refuses unsupported architectures by name and inconsistent shapes
  // (e.g. heads not dividing evenly) with a Status naming the key.
  static Result<ModelConfig> load(const std::string& dir);
  // Parses config.json text (`source` names it in errors).
  static Result<ModelConfig> parse(const std::string& json_text, const std::string& source);
  // Serialises as HF config.json (used by synth-model).
  std::string to_json() const;

  bool operator==(const ModelConfig&) const = default;
};

}  // namespace loragate
