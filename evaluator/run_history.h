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
// The recorded reference of a new run: the stored measurement of today's
// online base (`online_sha256`) on the same suite content (`suite_sha256`).
// That is the latest PASSING run on that suite which measured the base in
// either arm: arm "candidate" when the base was that run's candidate (after
// A -> B is promoted on a run that measured B as candidate, B's figures are
// that run's candidate arm), "online" when it served. Only passing runs: a
// failed or inconclusive run may hold a broken measurement, and a cancelled
// one is incomplete. `live` is that run's shadow traffic figures of the base
// (its report's "live", which are of its candidate) when the arm is
// "candidate" and it had them; null otherwise.
struct RecordedRun {
  RunResult run;
  std::string arm;
  nlohmann::json live;
  RecordedReference reference() const { return RecordedReference{&run, arm}; }
};
Result<std::optional<RecordedRun>> recorded_run(EvaluationStore& store, const std::string& online_sha256,
                                                const std::string& suite_sha256);
// The recorded run a stored report names ("recorded_run_id"), with the arm
// it was compared against ("recorded_arm", "online" for reports stored before
// the arm was named); none when the report names none. What `eval show`
// judges a stored run against again.
Result<std::optional<RecordedRun>> stored_reference(EvaluationStore& store, const nlohmann::json& report);
// Judges `run` (gates, recorded arm from `store`: recorded_run()) and stores
// it; returns it with its id and recorded_run_id / recorded_arm set. The
// stored report names the reference as top-level keys "recorded_run_id",
// "recorded_arm" and, when that run had live figures of the base,
// "recorded_live". `live` (shadow traffic's figures, may be null) goes into
// the stored report as its "live" arm.
Result<RunResult> judge_and_store(RunResult run, const GateConfig& gates, EvaluationStore& store,
                                  const nlohmann::json& live = nullptr);

}  // namespace loragate::eval
