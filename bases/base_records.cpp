#include "bases/base_records.h"

#include <cstdio>
#include <vector>

namespace loragate {

BaseModelState registry_state(BaseState s) {
  switch (s) {
    case BaseState::kLoading: return BaseModelState::kLoading;
    case BaseState::kCandidate: return BaseModelState::kCandidate;
    case BaseState::kServing: return BaseModelState::kServing;
    case BaseState::kDraining:
    case BaseState::kPrevious: return BaseModelState::kPrevious;
    case BaseState::kFailed: return BaseModelState::kFailed;
  }
  return BaseModelState::kFailed;
}

void record_base_state(Registry* registry, const BaseSpec& spec, BaseState state, const std::string& sha256,
                       const std::string& error) {
  if (registry == nullptr) return;
  BaseModelRecord r;
  r.name = spec.name;
  r.path = spec.path;
  r.dtype = std::string(weight_type_name(spec.dtype));
  r.sha256 = sha256;
  r.state = registry_state(state);
  r.error = error;
  Status s = registry->upsert_base_model(r).status();
  if (!s.is_ok()) std::fprintf(stderr, "loragate: registry: base '%s': %s\n", r.name.c_str(), s.to_string().c_str());
}

Status record_start_up(Registry* registry, const BaseSpec& spec, const ServingBase& base, const std::string& actor) {
  if (registry == nullptr) return Status::ok();
  BaseModelRecord r;
  r.name = spec.name;
  r.path = spec.path;
  r.dtype = std::string(weight_type_name(spec.dtype));
  r.sha256 = base.sha256();
  auto existing = registry->get_base_model(spec.name);
  const bool serves = existing.is_ok() && existing->state == BaseModelState::kServing;
  r.state = serves ? BaseModelState::kServing : BaseModelState::kCandidate;
  LG_RETURN_IF_ERROR(registry->upsert_base_model(r).status());
  if (serves) return Status::ok();
  std::string from;
  LG_ASSIGN_OR_RETURN(std::vector<BaseModelRecord> all, registry->list_base_models());
  for (const BaseModelRecord& b : all) {
    if (b.state == BaseModelState::kServing) from = b.name;
  }
  SwapRecord swap;
  swap.actor = actor;
  swap.from_base = from;
  swap.to_base = spec.name;
  swap.note = "start-up";
  return registry->record_swap(swap).status();
}

Status restore_adapters(Registry* registry, ServingBase& base) {
  if (registry == nullptr) return Status::ok();
  LG_ASSIGN_OR_RETURN(std::vector<AdapterRecord> adapters, registry->list_adapters(base.name()));
  for (const AdapterRecord& a : adapters) {
    if (a.state != AdapterState::kReady || base.adapters()->contains(a.name)) continue;
    LG_RETURN_IF_ERROR(base.adapters()->add(a.name, a.path, a.sha256).with_context("restoring adapter '" + a.name + "'"));
  }
  return Status::ok();
}

}  // namespace loragate
