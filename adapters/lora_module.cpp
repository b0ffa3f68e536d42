// LoraModule names, paths and shapes.
#include "adapters/lora_module.h"

namespace loragate {
namespace {

constexpr std::array<std::string_view, kLoraModuleCount> kNames = {
    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

int64_t head_dim_of(const ModelConfig& c) {
  if (c.head_dim > 0) return c.head_dim;
  return c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0;
}

int64_t kv_heads_of(const ModelConfig& c) {
  return c.num_key_value_heads > 0 ? c.num_key_value_heads : c.num_attention_heads;
}

}  // namespace

std::string_view lora_module_name(LoraModule m) { return kNames[lora_module_index(m)]; }

std::optional<LoraModule> lora_module_from_name(std::string_view name) {
  for (LoraModule m : kAllLoraModules) {
    if (lora_module_name(m) == name) return m;
  }
  return std::nullopt;
}

std::string_view lora_module_block(LoraModule m) {
  switch (m) {
    case LoraModule::kQ:
    case LoraModule::kK:
    case LoraModule::kV:
    case LoraModule::kO: return "self_attn";
    case LoraModule::kGate:
    case LoraModule::kUp:
    case LoraModule::kDown: return "mlp";
  }
  return "?";
}

std::string lora_module_path(int64_t layer, LoraModule m) {
  std::string path = "model.layers." + std::to_string(layer) + ".";
  path += lora_module_block(m);
  path += ".";
  path += lora_module_name(m);
  return path;
}

std::string lora_tensor_name(int64_t layer, LoraModule m, bool is_a) {
  return "base_model.model." + lora_module_path(layer, m) + (is_a ? ".lora_A.weight" : ".lora_B.weight");
}

std::string lora_module_names_list() {
  std::string out;
  for (std::string_view n : kNames) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

int64_t in_features(LoraModule m, const ModelConfig& base) {
  switch (m) {
    case LoraModule::kQ:
    case LoraModule::kK:
    case LoraModule::kV:
    case LoraModule::kGate:
    case LoraModule::kUp: return base.hidden_size;
    case LoraModule::kO: return base.num_attention_heads * head_dim_of(base);
    case LoraModule::kDown: return base.intermediate_size;
  }
  return 0;
}

int64_t out_features(LoraModule m, const ModelConfig& base) {
  switch (m) {
    case LoraModule::kQ: return base.num_attention_heads * head_dim_of(base);
    case LoraModule::kK:
    case LoraModule::kV: return kv_heads_of(base) * head_dim_of(base);
    case LoraModule::kO:
    case LoraModule::kDown: return base.hidden_size;
    case LoraModule::kGate:
    case LoraModule::kUp: return base.intermediate_size;
  }
  return 0;
}

}  // namespace loragate
