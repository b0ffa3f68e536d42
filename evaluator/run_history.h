// The evaluation history as the evaluator reads and writes it: a stored run
// back as a RunResult, the recorded reference of a new run, and judging a
// run and storing it. Plain functions over an EvaluationStore; as
// thread-safe as the store.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "evaluator/gates.h"
#include "registry/evaluation_store.h"

namespace loragate::eval {

// A stored record's report parsed back (its id set).
Result<RunResult> parse_stored(const EvaluationRecord& record);
// {"<arm>/<scenario>": sha256} of the adapters a run used (stored with it).
std::string adapters_json(const RunResult& run);
// The recorded arm of the next evaluation of a base with this sha256: the
// latest passing run that judged it (as a candidate, else as online).
Result<std::optional<RunResult>> recorded_run(EvaluationStore& store, const std::string& online_sha256);
// Judges `run` (gates, recorded arm from `store`) and stores it; returns it
// with its id. `live` (shadow traffic's figures, may be null) goes into the
// stored report as its "live" arm.
Result<RunResult> judge_and_store(RunResult run, const GateConfig& gates, EvaluationStore& store,
                                  const nlohmann::json& live = nullptr);

}  // namespace loragate::eval
