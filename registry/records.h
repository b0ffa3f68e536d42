// The plain values the registry stores and returns: base models, adapters and
// scenarios, their states, and the checks every record passes before it is
// written. Copyable structs with no behaviour beyond validation; safe to use
// from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace loragate {

// Where a base model stands in a base-model swap.
enum class BaseModelState {
  kOnline,     // serving traffic
  kCandidate,  // loaded for evaluation against the online base
  kRetired,    // no longer served; kept so its adapters and history stay
};
const char* base_model_state_name(BaseModelState state);  // "online", "candidate", "retired"
Result<BaseModelState> parse_base_model_state(std::string_view name);

enum class AdapterState {
  kReady,     // registered and servable
  kRemoving,  // being drained before removal; no new requests or scenarios
  kFailed,    // registered but failed to load; kept so the operator sees why
};
const char* adapter_state_name(AdapterState state);  // "ready", "removing", "failed"
Result<AdapterState> parse_adapter_state(std::string_view name);

struct BaseModelRecord {
  std::string name;  // unique key, e.g. "qwen2-0.5b"; printable, no spaces
  std::string path;  // the Hugging Face model directory
  BaseModelState state = BaseModelState::kOnline;
  int64_t created_at = 0;  // unix seconds, set by the registry
  int64_t updated_at = 0;  // unix seconds, set by the registry
};

struct AdapterRecord {
  std::string name;        // unique key across all bases; printable, no spaces or '/'
  std::string base_model;  // a registered base model's name
  std::string path;        // the PEFT adapter directory
  int64_t rank = 0;        // LoRA r, > 0
  double alpha = 0;        // lora_alpha, > 0
  std::vector<std::string> target_modules;  // e.g. {"q_proj", "v_proj"}; stored as JSON
  std::string sha256;      // of adapter_model.safetensors: 64 lowercase hex, or "" if unknown
  int64_t size_bytes = 0;  // of adapter_model.safetensors
  AdapterState state = AdapterState::kReady;
  int64_t created_at = 0;  // unix seconds, set by the registry
  int64_t updated_at = 0;  // unix seconds, set by the registry
};

// Routes requests for scenario `name` on `base_model` to `adapter`.
struct ScenarioRecord {
  std::string name;        // unique per base model; printable, no spaces or '/'
  std::string base_model;
  std::string adapter;     // an adapter of that same base model
  int64_t created_at = 0;  // unix seconds, set by the registry
  int64_t updated_at = 0;  // unix seconds, set by the registry
};

// invalid_argument naming `what` ("adapter name") unless `name` is 1..256
// printable ASCII characters without spaces (and without '/' when
// `allow_slash` is false: adapter and scenario names appear in URL paths).
Status validate_name(std::string_view what, std::string_view name, bool allow_slash);

// invalid_argument naming the record and the field that is wrong.
Status validate(const BaseModelRecord& record);
Status validate(const AdapterRecord& record);

}  // namespace loragate
