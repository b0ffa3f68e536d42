#include "registry/records.h"

#include <cmath>
#include <string>

namespace loragate {
namespace {

constexpr size_t kMaxNameLength = 256;

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
    case BaseModelState::kOnline: return "online";
    case BaseModelState::kCandidate: return "candidate";
    case BaseModelState::kRetired: return "retired";
  }
  return "unknown";
}

Result<BaseModelState> parse_base_model_state(std::string_view name) {
  for (BaseModelState s : {BaseModelState::kOnline, BaseModelState::kCandidate, BaseModelState::kRetired}) {
    if (name == base_model_state_name(s)) return s;
  }
  return Status::invalid_argument("unknown base model state " + in_quotes(name) +
                                  " (expected online, candidate or retired)");
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
  for (char c : name) {
    const bool printable = c > ' ' && c < 0x7f;  // also excludes space, controls and non-ASCII
    if (!printable || (c == '/' && !allow_slash)) {
      return Status::invalid_argument(std::string(what) + " " + in_quotes(name) +
                                      " may hold only printable ASCII without spaces" +
                                      (allow_slash ? "" : " or '/'"));
    }
  }
  return Status::ok();
}

Status validate(const BaseModelRecord& record) {
  LG_RETURN_IF_ERROR(validate_name("base model name", record.name, /*allow_slash=*/true));
  if (record.path.empty()) return Status::invalid_argument("base model " + in_quotes(record.name) + " has no path");
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

}  // namespace loragate
