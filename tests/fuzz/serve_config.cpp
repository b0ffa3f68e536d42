// The `loragate serve` YAML config: ServeConfig::parse() (yaml-cpp, then
// every section's keys, types and ranges), then the values derived from it.
//
// Input: the YAML text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cli/serve_config.h"

using namespace loragate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = ServeConfig::parse(text, "fuzz/loragate.yaml");
  if (!parsed.is_ok()) return 0;
  (void)parsed.value().resolved_base_roots();
  return 0;
}
