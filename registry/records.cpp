#include "registry/records.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

namespace loragate {
namespace {

constexpr size_t kMaxNameLength = 256;
constexpr size_t kMaxDtypeLength = 32;
constexpr size_t kMaxActorLength = 256;

// 's', built by appends: GCC 12 misreports "'" + s as an overlapping memcpy.
std::string in_quotes(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.append(1, '\'').append(s).append(1, '\'');
  return out;
}

bool is_lower_hex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

const char* base_model_state_name(BaseModelState state) {
  switch (state) {
    case BaseModelState::kLoading: return "loading";
    case BaseModelState::kCandidate: return "candidate";
    case BaseModelState::kServing: return "serving";
    case BaseModelState::kPrevious: return "previous";
    case BaseModelState::kFailed: return "failed";
    case BaseModelState::kRetired: return "retired";
  }
  return "unknown";
}

Result<BaseModelState> parse_base_model_state(std::string_view name) {
  for (BaseModelState s : {BaseModelState::kLoading, BaseModelState::kCandidate, BaseModelState::kServing,
                           BaseModelState::kPrevious, BaseModelState::kFailed, BaseModelState::kRetired}) {
    if (name == base_model_state_name(s)) return s;
  }
  if (name == "online") return BaseModelState::kServing;  // its name before schema version 3
  return Status::invalid_argument("unknown base model state " + in_quotes(name) +
                                  " (expected loading, candidate, serving, previous, failed or retired)");
}

const char* adapter_state_name(AdapterState state) {
  switch (state) {
    case AdapterState::kReady: return "ready";
    case AdapterState::kRemoving: return "removing";
    case AdapterState::kFailed: return "failed";
  }
  return "unknown";
}

Result<AdapterState> parse_adapter_state(std::string_view name) {
  for (AdapterState s : {AdapterState::kReady, AdapterState::kRemoving, AdapterState::kFailed}) {
    if (name == adapter_state_name(s)) return s;
  }
  return Status::invalid_argument("unknown adapter state " + in_quotes(name) + " (expected ready, removing or failed)");
}

Status validate_name(std::string_view what, std::string_view name, bool allow_slash) {
  if (name.empty()) return Status::invalid_argument(std::string(what) + " is empty");
  if (name.size() > kMaxNameLength) {
    return Status::invalid_argument(std::string(what) + " " + in_quotes(name.substr(0, 32)) + "... is longer than " +
                                    std::to_string(kMaxNameLength) + " characters");
  }
  // Names travel in URL paths and query strings: '?', '#', '%' or a '.'
  // segment would make a path name another record (DELETE /admin/adapters/a?x).
  for (char c : name) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                       c == '_' || c == '-';
    if (!plain && !(c == '/' && allow_slash)) {
      return Status::invalid_argument(std::string(what) + " " + in_quotes(name) + " may hold only letters, digits, " +
                                      (allow_slash ? "'.', '_', '-' and '/'" : "'.', '_' and '-'"));
    }
  }
  for (size_t begin = 0; begin <= name.size();) {  // no "." or ".." segment
    const size_t end = std::min(name.find('/', begin), name.size());
    const std::string_view segment = name.substr(begin, end - begin);
    if (segment == "." || segment == ".." || segment.empty()) {
      return Status::invalid_argument(std::string(what) + " " + in_quotes(name) + " has an empty, '.' or '..' part");
    }
    begin = end + 1;
  }
  return Status::ok();
}

Status validate(const BaseModelRecord& record) {
  LG_RETURN_IF_ERROR(validate_name("base model name", record.name, /*allow_slash=*/true));
  const std::string who = "base model " + in_quotes(record.name);
  if (record.path.empty()) return Status::invalid_argument(who + " has no path");
  if (record.dtype.empty()) return Status::invalid_argument(who + " has no dtype (e.g. f32 or bf16)");
  if (record.dtype.size() > kMaxDtypeLength) {
    return Status::invalid_argument(who + ": dtype " + in_quotes(record.dtype.substr(0, 32)) +
                                    "... is longer than " + std::to_string(kMaxDtypeLength) + " characters");
  }
  for (char c : record.dtype) {
    if (!(c > ' ' && c < 0x7f)) {
      return Status::invalid_argument(who + ": dtype " + in_quotes(record.dtype) +
                                      " may hold only printable ASCII without spaces");
    }
  }
  if (!record.sha256.empty() && (record.sha256.size() != 64 || !is_lower_hex(record.sha256))) {
    return Status::invalid_argument(who + ": sha256 " + in_quotes(record.sha256) +
                                    " is not 64 lowercase hex characters");
  }
  return Status::ok();
}

Status validate(const AdapterRecord& record) {
  LG_RETURN_IF_ERROR(validate_name("adapter name", record.name, /*allow_slash=*/false));
  const std::string who = "adapter " + in_quotes(record.name);
  LG_RETURN_IF_ERROR(validate_name("base model name", record.base_model, /*allow_slash=*/true).with_context(who));
  if (record.path.empty()) return Status::invalid_argument(who + " has no path");
  if (record.rank <= 0) return Status::invalid_argument(who + ": rank " + std::to_string(record.rank) + " is not > 0");
  if (!(std::isfinite(record.alpha) && record.alpha > 0)) {
    return Status::invalid_argument(who + ": alpha " + std::to_string(record.alpha) + " is not a finite number > 0");
  }
  for (const std::string& module : record.target_modules) {
    if (module.empty()) return Status::invalid_argument(who + ": an empty target module name");
  }
  if (!record.sha256.empty() && (record.sha256.size() != 64 || !is_lower_hex(record.sha256))) {
    return Status::invalid_argument(who + ": sha256 " + in_quotes(record.sha256) +
                                    " is not 64 lowercase hex characters");
  }
  if (record.size_bytes < 0) {
    return Status::invalid_argument(who + ": size_bytes " + std::to_string(record.size_bytes) + " is negative");
  }
  return Status::ok();
}

Status validate(const SwapRecord& record) {
  LG_RETURN_IF_ERROR(validate_name("base model name", record.to_base, /*allow_slash=*/true)
                         .with_context("swap to base model " + in_quotes(record.to_base)));
  const std::string who = "swap to base model " + in_quotes(record.to_base);
  if (!record.from_base.empty()) {
    LG_RETURN_IF_ERROR(validate_name("base model name", record.from_base, /*allow_slash=*/true).with_context(who));
  }
  if (record.kind != kSwapKindPromote && record.kind != kSwapKindRollback) {
    return Status::invalid_argument(who + ": kind " + in_quotes(record.kind) + " is not promote or rollback");
  }
  if (record.actor.empty()) return Status::invalid_argument(who + " has no actor (who is swapping)");
  if (record.actor.size() > kMaxActorLength) {
    return Status::invalid_argument(who + ": actor " + in_quotes(record.actor.substr(0, 32)) +
                                    "... is longer than " + std::to_string(kMaxActorLength) + " characters");
  }
  return Status::ok();
}

Status validate(const TrainingSetRecord& record) {
  LG_RETURN_IF_ERROR(validate_name("scenario name", record.scenario, /*allow_slash=*/false));
  const std::string who = "training set of scenario " + in_quotes(record.scenario);
  if (record.path.empty()) return Status::invalid_argument(who + " has no path");
  if (record.sha256.size() != 64 || !is_lower_hex(record.sha256)) {
    return Status::invalid_argument(who + ": sha256 " + in_quotes(record.sha256.substr(0, 80)) +
                                    " is not 64 lowercase hex characters");
  }
  // Its keys are the trainer's to check; the registry only keeps it whole.
  const nlohmann::json config = nlohmann::json::parse(record.config, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return Status::invalid_argument(who + ": config is not a JSON object");
  return Status::ok();
}

Status validate(const ReplicaRecord& record) {
  if (record.url.empty() || record.url.size() > 512) {
    return Status::invalid_argument("replica url must be 1..512 characters");
  }
  for (char c : record.url) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return Status::invalid_argument("replica url " + in_quotes(record.url) + " holds a space or control character");
    }
  }
  const std::string who = "replica " + in_quotes(record.url);
  for (const auto& [field, text] : {std::pair{"bases", &record.bases}, std::pair{"adapters", &record.adapters}}) {
    if (!nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false).is_array()) {
      return Status::invalid_argument(who + ": " + field + " is not a JSON array");
    }
  }
  return Status::ok();
}

Status validate(const RolloutRecord& record) {
  const std::string who = "rollout to base model " + in_quotes(record.to_base);
  LG_RETURN_IF_ERROR(validate_name("base model name", record.to_base, /*allow_slash=*/true).with_context(who));
  if (record.kind != kSwapKindPromote && record.kind != kSwapKindRollback) {
    return Status::invalid_argument(who + ": kind " + in_quotes(record.kind) + " is not promote or rollback");
  }
  static constexpr std::string_view kStates[] = {"rolling", "done", "rolled_back", "failed"};
  if (std::find(std::begin(kStates), std::end(kStates), record.state) == std::end(kStates)) {
    return Status::invalid_argument(who + ": state " + in_quotes(record.state) +
                                    " is not rolling, done, rolled_back or failed");
  }
  if (!nlohmann::json::parse(record.steps, nullptr, /*allow_exceptions=*/false).is_array()) {
    return Status::invalid_argument(who + ": steps is not a JSON array");
  }
  return Status::ok();
}

}  // namespace loragate
