// PEFT adapter_config.json: PeftConfig::parse() (types, refused features,
// target_modules as list or regex, exclude_modules, layers_to_transform,
// rank_pattern / alpha_pattern regexes, rsLoRA), then target() for every
// module of a few layers, as the adapter loader asks it.
//
// Input: the adapter_config.json text.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "adapters/peft_config.h"

using namespace loragate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = PeftConfig::parse(text, "fuzz/adapter_config.json");
  if (!parsed.is_ok()) return 0;
  const PeftConfig& config = parsed.value();
  for (int64_t layer : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{31}, int64_t{1} << 40}) {
    for (LoraModule module : kAllLoraModules) {
      const auto target = config.target(layer, module);
      if (target && (target->rank <= 0 || !std::isfinite(target->scaling))) __builtin_trap();  // loadable targets only
    }
  }
  (void)config.scaling_for(config.r(), config.lora_alpha());
  return 0;
}
