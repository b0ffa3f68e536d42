// Whether the evaluation history authorises promoting a candidate base over
// the serving one: what `promote` (without force) asks first, and what
// GET /admin/bases shows for each candidate.
//
// A passing stored run authorises the promotion only when all of these hold:
//  (a) its online base's sha256 is the serving base's;
//  (b) its candidate base's sha256 is the promoted base's;
//  (c) every scenario routed on the serving base now (not at run time) is in
//      the run, and routed on the candidate base, with the adapter (sha256)
//      each base routes it to now: the online arm's the serving base's, the
//      candidate arm's the candidate's;
//  (d) it ran the server's configured suite and gates, by content hash
//      (evaluation.suite / evaluation.gates). No suite configured: any suite
//      that covers (c) will do. No gates configured: the shipped defaults
//      (GateConfig::defaults()) are required, so that a gates file turning
//      sections off never authorises a promotion by itself;
//  (e) no newer run of the same pair (same online and candidate sha256)
//      failed. Inconclusive and cancelled runs do not count against it.
// The run judged is the latest passing run of the pair that satisfies (d);
// without one, the latest passing run of the pair; without one, the latest
// passing run of the candidate (by sha256, then by name) against any base.
// Every condition that run does not meet is a reason of its own.
//
// Plain functions over the registry and the store; as thread-safe as they are.
#pragma once

#include <string>
#include <vector>

#include "bases/serving_base.h"
#include "common/status.h"
#include "registry/evaluation_store.h"
#include "registry/registry.h"

namespace loragate::eval {

// The adapter the registry routes `scenario` to on `base`, with its directory and sha256.
Result<AdapterRecord> routed_adapter(Registry& registry, const std::string& scenario, const std::string& base);

// What a run must have used to authorise a promotion: the server's configured
// suite and gates, by content hash, and where they came from (for messages).
struct PromotionRequirements {
  std::string suite_sha256;  // "" = no suite configured: any suite covering the routed scenarios
  std::string gates_sha256;  // "" = the shipped defaults' hash
  std::string suite_path, gates_path;  // "" = not configured
};

// Reads the configured suite and gates (evaluation.suite / evaluation.gates;
// "" = not configured) and hashes them as runs store them: the suite with
// suite_sha256(), the gates as sha256 of GateConfig::to_yaml() (the defaults'
// when none is configured).
Result<PromotionRequirements> load_promotion_requirements(const std::string& suite_path,
                                                          const std::string& gates_path);

// A base as the history knows it: its registry name and weights' sha256.
struct BaseIdentity {
  std::string name, sha256;
};

// Why the history does not authorise promoting `candidate` over `serving`:
// one self-contained line per unmet condition (empty = it does). Errors are
// those of reading the registry or the store.
Result<std::vector<std::string>> promotion_blockers(Registry& registry, EvaluationStore& store,
                                                    const PromotionRequirements& required,
                                                    const BaseIdentity& serving, const BaseIdentity& candidate);

}  // namespace loragate::eval
