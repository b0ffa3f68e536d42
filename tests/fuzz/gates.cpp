// The evaluator's gates YAML: GateConfig::parse() (sections, metrics, rules,
// margins), then the stored form: to_yaml() must parse back to the same text,
// since a stored run is judged again from it.
//
// Input: the gates YAML text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "evaluator/gates.h"

using namespace loragate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = eval::GateConfig::parse(text, "fuzz/gates.yaml");
  if (!parsed.is_ok()) return 0;
  const std::string stored = parsed->to_yaml();
  auto again = eval::GateConfig::parse(stored, "fuzz/stored-gates.yaml");
  if (!again.is_ok() || again->to_yaml() != stored) __builtin_trap();
  return 0;
}
