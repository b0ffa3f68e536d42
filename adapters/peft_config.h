// PeftConfig: a validated PEFT LoRA adapter_config.json.
//
// parse() refuses, naming the key, everything loragate cannot serve
// faithfully: a peft_type other than LORA, DoRA, modules_to_save, biases,
// fan_in_fan_out, LoRA on embeddings or lm_head, layer replication. Keys that
// only matter for training (lora_dropout, init_lora_weights, task_type, ...)
// are ignored. target() then answers, for one (layer, module), whether the
// adapter targets it and with which rank and scaling, following PEFT's rules:
//   - target_modules as a list: a module path matches an entry when it equals
//     it or ends with "." + entry; layers_to_transform then filters by layer.
//   - target_modules as a string: "all-linear" (all seven modules), a plain
//     module name, or else a regex that must fully match the module path
//     ("model.layers.3.self_attn.q_proj"); layers_to_transform is not applied.
//   - rank_pattern / alpha_pattern: the first key (in file order) for which
//     the regex "(.*\.)?(?:key)" fully matches the module path gives the
//     module its own rank / alpha.
//   - scaling = alpha / r, or alpha / sqrt(r) with use_rslora.
// Immutable after parse; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "adapters/lora_module.h"
#include "common/status.h"

namespace loragate {

class AdapterDir;

// The largest lora_alpha (or alpha_pattern value) accepted.
inline constexpr double kMaxLoraAlpha = 65536;

// How one targeted (layer, module) is adapted.
struct LoraTarget {
  int64_t rank = 0;
  double alpha = 0;
  float scaling = 0;  // alpha / rank, or alpha / sqrt(rank) with use_rslora
};

class PeftConfig {
 public:
  // Parses adapter_config.json text; `source` names it in errors.
  static Result<PeftConfig> parse(const std::string& json_text, const std::string& source);
  // Reads and parses adapter_config.json of `dir` (not_found when absent;
  // refused when it resolves outside the directory, see AdapterDir).
  static Result<PeftConfig> load(const AdapterDir& dir);
  static Result<PeftConfig> load(const std::string& dir);

  // The rank, alpha and scaling of (layer, module), or nullopt when the
  // adapter does not target it. Does not know the base's layer count.
  std::optional<LoraTarget> target(int64_t layer, LoraModule module) const;

  int64_t r() const { return r_; }                  // default rank ("r", PEFT default 8)
  double lora_alpha() const { return lora_alpha_; } // default alpha (PEFT default 8)
  bool use_rslora() const { return use_rslora_; }
  // Explicit layer indices from layers_to_transform (empty = every layer).
  const std::vector<int64_t>& layers_to_transform() const { return layers_to_transform_; }
  // Informational only (never used to pick the base).
  const std::string& base_model_name_or_path() const { return base_model_; }
  const std::string& source() const { return source_; }

  // The scaling PEFT applies for `rank` and `alpha` under this config.
  float scaling_for(int64_t rank, double alpha) const;

 private:
  // A regex kept with its text (std::regex cannot print itself).
  struct Pattern {
    std::string text;
    std::shared_ptr<const std::regex> re;
  };

  bool matches_targets(int64_t layer, const std::string& path) const;
  bool excluded(const std::string& path) const;

  std::string source_;
  std::string base_model_;
  int64_t r_ = 8;
  double lora_alpha_ = 8;
  bool use_rslora_ = false;

  // target_modules: either a list of names / path suffixes, or one regex.
  std::vector<std::string> target_names_;
  std::optional<Pattern> target_regex_;
  // exclude_modules: same two forms.
  std::vector<std::string> exclude_names_;
  std::optional<Pattern> exclude_regex_;
  std::vector<int64_t> layers_to_transform_;

  std::vector<std::pair<Pattern, int64_t>> rank_pattern_;
  std::vector<std::pair<Pattern, double>> alpha_pattern_;
};

}  // namespace loragate
