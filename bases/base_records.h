// How a BaseSet's bases persist in the registry: their states, the start-up
// swap, and the adapters registered for a base, put back in its cache when it
// loads. Free functions over a Registry (null = nothing persists, for tests);
// each is one or a few registry writes, which wait for an fsync: never call
// them under a lock that serving a request takes.
#pragma once

#include <string>

#include "bases/base_state.h"
#include "bases/serving_base.h"
#include "common/status.h"
#include "registry/registry.h"

namespace loragate {

// The registry's state of a base (draining is recorded as previous).
BaseModelState registry_state(BaseState state);
// Records `spec` as `state` (`sha256` "" until loaded, `error` why it failed); logs a failure.
void record_base_state(Registry* registry, const BaseSpec& spec, BaseState state, const std::string& sha256,
                       const std::string& error);
// A base that starts serving at start-up: recorded serving when the registry
// says it served, else candidate plus a "start-up" swap from whichever served.
Status record_start_up(Registry* registry, const BaseSpec& spec, const ServingBase& base, const std::string& actor);
// Adds the ready adapters the registry holds for `base` to its cache.
Status restore_adapters(Registry* registry, ServingBase& base);

}  // namespace loragate
