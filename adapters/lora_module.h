// LoraModule: the seven linear layers of a Llama decoder layer that LoRA may
// target, their PEFT names, sub-blocks and shapes for a given base model.
//
// Pure functions over values; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model/model_config.h"

namespace loragate {

enum class LoraModule { kQ, kK, kV, kO, kGate, kUp, kDown };

inline constexpr int kLoraModuleCount = 7;
inline constexpr std::array<LoraModule, kLoraModuleCount> kAllLoraModules = {
    LoraModule::kQ,    LoraModule::kK,  LoraModule::kV,   LoraModule::kO,
    LoraModule::kGate, LoraModule::kUp, LoraModule::kDown};

// 0..6, for indexing per-module arrays.
inline constexpr int lora_module_index(LoraModule m) { return static_cast<int>(m); }

// The PEFT / Hugging Face name: "q_proj", "k_proj", ..., "down_proj".
std::string_view lora_module_name(LoraModule m);
// The inverse of lora_module_name; nullopt for any other name.
std::optional<LoraModule> lora_module_from_name(std::string_view name);
// The sub-block of the decoder layer holding the module: "self_attn" or "mlp".
std::string_view lora_module_block(LoraModule m);
// The module's path in a LlamaForCausalLM, as PEFT matches it:
// "model.layers.3.self_attn.q_proj".
std::string lora_module_path(int64_t layer, LoraModule m);
// The key of the module's lora_A (is_a) or lora_B weight in a PEFT
// adapter_model.safetensors: "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight".
std::string lora_tensor_name(int64_t layer, LoraModule m, bool is_a);
// "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj" (for messages).
std::string lora_module_names_list();

// Input and output width of the module's base weight W [out, in] for `base`:
//   q: hidden -> heads*head_dim      k, v: hidden -> kv_heads*head_dim
//   o: heads*head_dim -> hidden      gate, up: hidden -> intermediate
//   down: intermediate -> hidden
int64_t in_features(LoraModule m, const ModelConfig& base);
int64_t out_features(LoraModule m, const ModelConfig& base);

}  // namespace loragate
