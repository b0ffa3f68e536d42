// The evaluator's suite YAML: parse_suite_spec() (yaml-cpp, keys, types,
// scenario names, the scenario and stop caps), then load_suite() of the same
// text written to a scratch file with its directory as the only root, so
// that paths the input names are resolved and confined (and only the
// scratch file itself can be read: nothing outside the scratch directory).
//
// Input: the suite YAML text.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "evaluator/suite.h"
#include "tests/fuzz/fuzz_util.h"

using namespace loragate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::ScratchFile scratch("suite.yaml");
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = eval::parse_suite_spec(text, "fuzz/suite.yaml");
  if (parsed.is_ok()) {
    const eval::Suite& suite = parsed.value();
    if (suite.scenarios.empty() || suite.scenarios.size() > eval::kMaxScenarios) __builtin_trap();
    std::set<std::string> names;
    for (const eval::ScenarioSpec& s : suite.scenarios) {
      if (s.name.empty() || s.name == "generic" || !names.insert(s.name).second) __builtin_trap();
      if (s.eval_path.empty() || s.max_tokens < 1 || !s.items.empty()) __builtin_trap();
    }
  }
  if (size > static_cast<size_t>(eval::kMaxSuiteFileBytes)) return 0;
  auto loaded = eval::load_suite(scratch.write(text), {scratch.dir()});
  if (loaded.is_ok() && (loaded->content_sha256.size() != 64 || loaded->scenarios.empty())) __builtin_trap();
  return 0;
}
