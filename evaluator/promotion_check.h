// Whether the evaluation history authorises promoting a candidate base over
// the serving one: what `promote` (without force) asks first.
// Plain functions over the registry and the store; as thread-safe as they are.
#pragma once

#include <string>

#include "bases/serving_base.h"
#include "common/status.h"
#include "registry/evaluation_store.h"
#include "registry/registry.h"

namespace loragate::eval {

// The adapter the registry routes `scenario` to on `base`, with its directory and sha256.
Result<AdapterRecord> routed_adapter(Registry& registry, const std::string& scenario, const std::string& base);

// What a run must have used to authorise a promotion: the server's configured
// suite and gates (evaluation.suite / evaluation.gates), by content hash.
// "" = not configured.
struct PromotionRequirements {
  std::string suite_sha256;
  std::string gates_sha256;
};

// ok when a passing stored run covers `candidate` against `serving` with the
// adapters the registry routes each of its scenarios to now; otherwise
// failed_precondition saying what is missing.
Status check_promotion(Registry& registry, EvaluationStore& store, const PromotionRequirements& required,
                       const ServingBase& serving, const ServingBase& candidate);

}  // namespace loragate::eval
