// The promotion policy of a BaseSet: what a base lacks before it may serve in
// place of the serving one. The BaseSet decides with it and then swaps; the
// policy only reads (the registry, or the adapter caches without one).
#pragma once

#include <string>
#include <vector>

#include "bases/serving_base.h"
#include "registry/registry.h"

namespace loragate {

// "adapter 'x'" for every ready adapter name of `current` with no version on
// `target`, and "scenario 'y'" for every scenario routed on `current` and not
// on `target`. Without a registry (null): the adapter caches' names alone.
std::vector<std::string> missing_on(Registry* registry, const ServingBase& current, const ServingBase& target);
// "a, b, c" (items between `separator`).
std::string joined(const std::vector<std::string>& items, const std::string& separator = ", ");

}  // namespace loragate
