// PEFT adapter folders: config JSON, f32 safetensors streamed from the
// caller's buffers, each file written atomically.
#include "adapters/peft_writer.h"

#include <bit>
#include <filesystem>
#include <limits>

#include "common/atomic_file.h"
#include "model/safetensors.h"

namespace loragate {

nlohmann::json peft_adapter_config_json(const PeftAdapterSpec& spec) {
  nlohmann::json targets = nlohmann::json::array();
  for (LoraModule m : spec.targets) targets.push_back(std::string(lora_module_name(m)));
  nlohmann::json config = {{"peft_type", "LORA"},
                           {"task_type", "CAUSAL_LM"},
                           {"r", spec.rank},
                           {"lora_alpha", spec.lora_alpha},
                           {"lora_dropout", 0.0},
                           {"bias", "none"},
                           {"use_rslora", spec.use_rslora},
                           {"target_modules", targets},
                           {"base_model_name_or_path", spec.base_model_name_or_path}};
  if (!spec.layers_to_transform.empty()) config["layers_to_transform"] = spec.layers_to_transform;
  return config;
}

Status write_peft_adapter(const std::string& dir, const PeftAdapterSpec& spec,
                          const std::vector<PeftTensor>& tensors) {
  if (spec.rank < 1) return Status::invalid_argument(dir + ": adapter rank must be > 0");
  if (spec.targets.empty()) return Status::invalid_argument(dir + ": an adapter needs at least one target module");
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const PeftTensor& t : tensors) {
    uint64_t numel = 1;
    bool valid = true;
    for (int64_t d : t.shape) {
      valid = valid && d >= 0 && (d == 0 || numel <= std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d));
      if (valid) numel *= static_cast<uint64_t>(d);
    }
    if (!valid || numel != t.values.size()) {
      return Status::invalid_argument(dir + ": tensor '" + t.name + "' has " + std::to_string(t.values.size()) +
                                      " values, which its shape does not hold");
    }
    specs.push_back({t.name, DType::kF32, t.shape});
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::io_error(dir + ": cannot create directory: " + ec.message());

  static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");
  LG_ASSIGN_OR_RETURN(auto writer, SafetensorsWriter::create(dir + "/adapter_model.safetensors", std::move(specs)));
  for (const PeftTensor& t : tensors) {
    LG_RETURN_IF_ERROR(writer->append(t.values.data(), t.values.size_bytes()));
  }
  LG_RETURN_IF_ERROR(writer->finish());
  return write_file_atomic(dir + "/adapter_config.json", peft_adapter_config_json(spec).dump(2) + "\n");
}

}  // namespace loragate
