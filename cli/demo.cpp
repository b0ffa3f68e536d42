#include "cli/demo.h"

#include <filesystem>

#include "adapters/synth_adapter.h"
#include "model/model_config.h"
#include "model/synth_model.h"

namespace loragate {

Result<Demo> ensure_demo(const std::string& dir) {
  namespace fs = std::filesystem;
  Demo demo;
  demo.model_dir = (fs::absolute(dir) / "model").string();
  demo.adapters_root = (fs::absolute(dir) / "adapters").string();
  if (!fs::exists(demo.model_dir + "/model.safetensors")) {
    LG_RETURN_IF_ERROR(write_synth_model(demo.model_dir, SynthOptions{"tiny", 2026, DType::kF32}));
  }
  LG_ASSIGN_OR_RETURN(ModelConfig base, ModelConfig::load(demo.model_dir));
  struct Spec {
    const char* name;
    const char* scenario;
    int64_t rank;
    std::vector<LoraModule> targets;
  };
  const std::vector<Spec> specs = {
      {"support-bot", "support", 8, {LoraModule::kQ, LoraModule::kK, LoraModule::kV, LoraModule::kO}},
      {"legal-summary", "legal", 16, {kAllLoraModules.begin(), kAllLoraModules.end()}},
      {"poetry", "poems", 4, {LoraModule::kQ, LoraModule::kV}},
  };
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string path = demo.adapters_root + "/" + specs[i].name;
    if (!fs::exists(path + "/adapter_model.safetensors")) {
      SynthAdapterOptions o;
      o.rank = specs[i].rank;
      o.lora_alpha = 2.0 * static_cast<double>(specs[i].rank);
      o.targets = specs[i].targets;
      o.seed = 7 + i;
      o.b_std = 0.2;  // visibly different answers per adapter
      LG_RETURN_IF_ERROR(write_synth_adapter(path, base, o));
    }
    demo.adapters.push_back({specs[i].name, path});
    demo.scenarios[specs[i].scenario] = specs[i].name;
  }
  return demo;
}

void apply_demo(const Demo& demo, ServeConfig& config) {
  config.model_path = demo.model_dir;
  // The demo's registry is its own: what other runs from this folder register or
  // promote (an upgrade walk-through, another model) never reaches it.
  if (config.registry_path.empty()) config.registry_path = (std::filesystem::path(config.demo_dir) / "registry.db").string();
  if (config.served_model_name.empty()) config.served_model_name = "loragate-demo";
  config.adapter_roots.push_back(demo.adapters_root);
  for (const PreloadAdapter& a : demo.adapters) config.preload.push_back(a);
  for (const auto& [scenario, adapter] : demo.scenarios) config.scenarios.emplace(scenario, adapter);
}

}  // namespace loragate
