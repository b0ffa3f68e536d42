// LoraAdapter: one PEFT LoRA adapter loaded from disk, validated against a
// base model and converted to f32.
//
// load() reads `dir`/adapter_config.json and `dir`/adapter_model.safetensors,
// checks that every tensor belongs to a module the config targets, that every
// targeted (layer, module) of the base has both A [rank, in] and B [out, rank]
// with exactly the base's shapes, and that no rank exceeds max_rank. Any
// failure returns a Status naming the file and the tensor or key; nothing is
// kept. A loaded adapter is immutable and shared (thread-safe to read).
//
// Per targeted linear W, the adapter adds   y += scaling * B (A x).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "adapters/lora_module.h"
#include "adapters/peft_config.h"
#include "common/status.h"
#include "model/model_config.h"

namespace loragate {

// The low-rank update of one (layer, module).
struct LoraWeights {
  int64_t rank = 0;
  float scaling = 0;     // lora_alpha / rank, or / sqrt(rank) with use_rslora
  int64_t in = 0;        // in_features of the module
  int64_t out = 0;       // out_features of the module
  std::vector<float> a;  // lora_A: [rank, in], row-major
  std::vector<float> b;  // lora_B: [out, rank], row-major

  size_t bytes() const { return (a.size() + b.size()) * sizeof(float); }
};

class LoraAdapter {
 public:
  // Loads and validates the adapter in `dir` for `base`. Refuses ranks above
  // `max_rank` (the serving slots' capacity) and files that resolve outside
  // `confined_to` ("" = the directory's own real path; see AdapterDir). The
  // adapter's name is the directory's last component.
  static Result<std::shared_ptr<const LoraAdapter>> load(const std::string& dir,
                                                         const ModelConfig& base,
                                                         int64_t max_rank,
                                                         const std::string& confined_to = "");

  LoraAdapter(const LoraAdapter&) = delete;
  LoraAdapter& operator=(const LoraAdapter&) = delete;

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }  // the directory it was loaded from
  const PeftConfig& config() const { return config_; }
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }

  // The weights of (layer, module), or nullptr when the adapter leaves it alone
  // (or layer is out of range).
  const LoraWeights* weights(int64_t layer, LoraModule module) const;
  // The largest rank of any targeted module.
  int64_t max_rank() const { return max_rank_; }
  // How many (layer, module) pairs are targeted.
  int64_t num_targets() const { return num_targets_; }
  // Host memory held by the f32 A and B matrices.
  size_t bytes() const { return bytes_; }
  // SHA-256 (hex) of the adapter_model.safetensors these weights were read from.
  const std::string& weights_sha256() const { return weights_sha256_; }
  // What its K/V contributions depend on: the weights' sha256 with every
  // module's rank and scaling (the prefix cache keys blocks by it).
  const std::string& kv_identity() const { return kv_identity_; }

 private:
  explicit LoraAdapter(PeftConfig config) : config_(std::move(config)) {}

  std::string name_;
  std::string path_;
  PeftConfig config_;
  std::vector<std::array<std::optional<LoraWeights>, kLoraModuleCount>> layers_;
  int64_t max_rank_ = 0;
  int64_t num_targets_ = 0;
  size_t bytes_ = 0;
  std::string weights_sha256_;
  std::string kv_identity_;
};

}  // namespace loragate
