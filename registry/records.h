// The plain values the registry stores and returns: base models, adapters,
// scenarios, their training sets, base-model swaps, the replicas of a fleet and its rollouts, their states, and the checks every record
// passes before it is written. Copyable structs with no behaviour beyond validation; safe to use
// from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace loragate {

// Where a base model generation stands in the base-model swaps.
// Registry::record_swap moves bases between kServing, kPrevious and
// kCandidate; Registry::set_base_state moves them anywhere but kServing.
enum class BaseModelState {
  kLoading,    // registered; its weights are being loaded or converted
  kCandidate,  // loaded, for evaluation against the serving base; may be promoted
  kServing,    // takes traffic; exactly one base after any record_swap
  kPrevious,   // served before the last swap: the rollback target
  kFailed,     // failed to load or verify; BaseModelRecord::error says why
  kRetired,    // no longer served; kept so its adapters and history stay
};
// "loading", "candidate", "serving", "previous", "failed", "retired".
const char* base_model_state_name(BaseModelState state);
// The inverse of base_model_state_name; also reads "online", the name of
// kServing in files written before schema version 3.
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
  BaseModelState state = BaseModelState::kServing;
  std::string dtype = "f32";  // weight storage: "f32", "bf16" or another short token (1..32 printable, no spaces)
  std::string sha256;         // identity of the weight files: 64 lowercase hex, or "" if unknown
  std::string error;          // why it failed when state is kFailed; stored as "" in any other state
  int64_t created_at = 0;  // unix seconds, set by the registry
  int64_t updated_at = 0;  // unix seconds, set by the registry
};

struct AdapterRecord {
  // A tenant's handle for the adapter: unique per base model, so the same
  // name on two bases is two records (the adapter retrained for each base).
  // (name, base_model) is the key. Printable, no spaces or '/'.
  std::string name;
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

// The data a scenario's adapter is trained from, and how: what an upgrade to
// another base retrains the scenario's adapter with. It belongs to the
// scenario's name, not to one base: the scenario "mia" on every base shares
// it, so that after a promotion the next upgrade still finds it.
struct TrainingSetRecord {
  std::string scenario;    // a scenario name (printable, no spaces or '/')
  std::string path;        // the JSONL training file, as the server resolved it (real path)
  std::string sha256;      // of the file when it was recorded: 64 lowercase hex
  std::string config;      // the training config as a JSON object (trainer/train_config.h), as text
  int64_t created_at = 0;  // unix seconds, set by the registry
  int64_t updated_at = 0;  // unix seconds, set by the registry
};

// SwapRecord::kind values.
inline constexpr const char* kSwapKindPromote = "promote";
inline constexpr const char* kSwapKindRollback = "rollback";

// One base-model swap, as history: which base started serving, from which,
// who did it and how. Bases are named as text, so history outlives them.
struct SwapRecord {
  int64_t id = 0;          // increasing with each swap; set by the registry
  int64_t at = 0;          // unix seconds, set by the registry
  std::string actor;       // who swapped (admin user, "cli", ...): 1..256 characters
  std::string from_base;   // the base that served before; "" for the first base
  std::string to_base;     // the base that serves now: a registered base model's name
  std::string kind = "promote";  // "promote" (a candidate goes live) or "rollback" (the previous base returns)
  bool forced = false;     // swapped although a check (evaluation, missing adapters) did not pass
  std::string note;        // free text, e.g. what was missing when forced
};

// One loragate process of a fleet, as it last reported itself (its
// heartbeat). Keyed by url: a replica restarted on the same address takes
// its row back, with the base a rollout asked of it.
struct ReplicaRecord {
  std::string url;           // where it answers, e.g. "http://10.0.0.5:8000"; 1..512 printable, no spaces
  std::string serving;       // the base it serves now ("" while starting)
  std::string bases;         // JSON array, [{"name", "state"}] of the bases loaded there
  std::string adapters;      // JSON array, [{"name", "base"}] of the adapters in its caches
  std::string desired_base;  // the base a rollout asks it to serve; "" = the fleet's serving base
  int64_t started_at = 0;    // unix seconds when the process started (a restart changes it)
  int64_t last_seen = 0;     // unix milliseconds of the last heartbeat, set by the registry
};

// A fleet-wide base swap (a rolling promote or rollback): which replicas
// swapped, in what order, what each check found, and how it ended.
struct RolloutRecord {
  int64_t id = 0;              // set by the registry
  int64_t started_at = 0;      // unix seconds, set by the registry
  int64_t updated_at = 0;      // unix seconds, set by the registry
  std::string kind = "promote";  // "promote" | "rollback"
  std::string from_base, to_base;
  std::string coordinator;     // the url of the replica that drives it
  std::string state = "rolling";  // "rolling" (running) | "done" | "rolled_back" | "failed"
  std::string steps = "[]";    // JSON array, one object per replica swapped
  std::string error;           // why it rolled back or failed
};

// invalid_argument naming `what` ("adapter name") unless `name` is 1..256
// characters of [A-Za-z0-9._-] (and '/' when `allow_slash`: base names like
// "meta-llama/Llama-3.2-1B"), with no empty, "." or ".." part: names appear
// in URL paths and query strings.
Status validate_name(std::string_view what, std::string_view name, bool allow_slash);

// invalid_argument naming the record and the field that is wrong.
Status validate(const BaseModelRecord& record);
Status validate(const AdapterRecord& record);
Status validate(const SwapRecord& record);
Status validate(const TrainingSetRecord& record);
Status validate(const ReplicaRecord& record);
Status validate(const RolloutRecord& record);

}  // namespace loragate
