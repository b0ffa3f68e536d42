// The embedded default of `loragate serve`: with no model configured, a small
// Llama model and a few LoRA adapters are synthesised on first run into a
// cache directory (seeded, so every machine gets the same files), and
// registered with scenarios so the demo answers at once.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cli/serve_config.h"
#include "common/status.h"

namespace loragate {

struct Demo {
  std::string model_dir;
  std::string adapters_root;
  std::vector<PreloadAdapter> adapters;           // name -> directory
  std::map<std::string, std::string> scenarios;   // scenario -> adapter
};

// Writes what is missing under `dir` and returns the demo's layout.
Result<Demo> ensure_demo(const std::string& dir);

// Points `config` at the demo (model, adapter root, preloads, scenarios),
// keeping whatever the config already sets.
void apply_demo(const Demo& demo, ServeConfig& config);

}  // namespace loragate
