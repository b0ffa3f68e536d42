#include "adapters/synth_adapter.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/random.h"
#include "model/safetensors.h"

namespace loragate {
namespace {

TensorData normal_tensor(const std::string& name, int64_t rows, int64_t cols, double stddev, uint64_t seed) {
  NormalGen gen(seed ^ fnv1a64(name));
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (float& x : v) x = static_cast<float>(gen.next() * stddev);
  TensorData t;
  t.name = name;
  t.dtype = DType::kF32;
  t.shape = {rows, cols};
  t.bytes.resize(v.size() * sizeof(float));
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

}  // namespace

Status write_synth_adapter(const std::string& out_dir, const ModelConfig& base, const SynthAdapterOptions& o) {
  if (o.rank <= 0) return Status::invalid_argument("adapter rank must be > 0");
  if (o.targets.empty()) return Status::invalid_argument("an adapter needs at least one target module");
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return Status::io_error(out_dir + ": " + ec.message());

  std::vector<TensorData> tensors;
  nlohmann::json targets = nlohmann::json::array();
  for (LoraModule m : o.targets) targets.push_back(std::string(lora_module_name(m)));
  for (int64_t layer = 0; layer < base.num_hidden_layers; ++layer) {
    for (LoraModule m : o.targets) {
      const std::string prefix = "base_model.model." + lora_module_path(layer, m);
      const int64_t in = in_features(m, base), out = out_features(m, base);
      tensors.push_back(normal_tensor(prefix + ".lora_A.weight", o.rank, in, 1.0 / std::sqrt(double(in)), o.seed));
      tensors.push_back(normal_tensor(prefix + ".lora_B.weight", out, o.rank, o.b_std, o.seed));
    }
  }
  LG_RETURN_IF_ERROR(write_safetensors(out_dir + "/adapter_model.safetensors", tensors));

  const nlohmann::json config = {{"peft_type", "LORA"},
                                 {"task_type", "CAUSAL_LM"},
                                 {"r", o.rank},
                                 {"lora_alpha", o.lora_alpha},
                                 {"lora_dropout", 0.0},
                                 {"bias", "none"},
                                 {"use_rslora", false},
                                 {"target_modules", targets},
                                 {"base_model_name_or_path", "synthetic"}};
  std::ofstream out(out_dir + "/adapter_config.json", std::ios::trunc);
  out << config.dump(2) << "\n";
  if (!out) return Status::io_error(out_dir + "/adapter_config.json: write failed");
  return Status::ok();
}

}  // namespace loragate
