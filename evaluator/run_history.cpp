// The evaluation history: stored runs read back, the recorded reference, judge and store.
#include "evaluator/run_history.h"

#include <chrono>

#include "common/sha256.h"
#include "evaluator/report.h"

namespace loragate::eval {

using nlohmann::json;

namespace {

int64_t history_unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Result<RunResult> parse_stored(const EvaluationRecord& r) {
  const json report = json::parse(r.report, nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded()) return Status::corrupt("evaluation run " + std::to_string(r.id) + ": report is not JSON");
  LG_ASSIGN_OR_RETURN(RunResult run, run_from_json(report));
  run.id = r.id;
  return run;
}

std::string adapters_json(const RunResult& run) {
  json j = json::object();
  for (const ScenarioResult& s : run.scenarios) {
    for (const auto& [arm, a] : s.arms) {
      if (!a.adapter_sha256.empty()) j[arm + "/" + s.name] = a.adapter_sha256;
    }
  }
  return j.dump();
}

Result<std::optional<RunResult>> recorded_run(EvaluationStore& store, const std::string& online_sha256) {
  LG_ASSIGN_OR_RETURN(std::optional<EvaluationRecord> r, store.latest_pass(online_sha256, ""));
  if (!r) {
    LG_ASSIGN_OR_RETURN(r, store.latest_pass("", online_sha256));
  }
  if (!r) return std::optional<RunResult>();
  LG_ASSIGN_OR_RETURN(RunResult run, parse_stored(*r));
  return std::optional<RunResult>(std::move(run));
}

Result<RunResult> judge_and_store(RunResult run, const GateConfig& gates, EvaluationStore& store,
                                  const nlohmann::json& live) {
  // Every rule spelled out: the stored run is judged the same whatever later defaults say.
  run.gates_text = gates.to_yaml();
  run.gates_sha256 = sha256_hex(run.gates_text);
  LG_ASSIGN_OR_RETURN(std::optional<RunResult> recorded, recorded_run(store, run.online_sha256));
  run.gates = evaluate_gates(gates, run, {recorded ? &*recorded : nullptr});
  run.verdict = overall_verdict(run.gates);

  EvaluationRecord record;
  record.started_at = run.started_at;
  record.finished_at = history_unix_seconds();
  record.online_base = run.online_base;
  record.online_sha256 = run.online_sha256;
  record.candidate_base = run.candidate_base;
  record.candidate_sha256 = run.candidate_sha256;
  record.adapters = adapters_json(run);
  record.suite_sha256 = run.suite_sha256;
  record.gates_sha256 = run.gates_sha256;
  record.verdict = verdict_name(run.verdict);
  json report = report_json(run);
  if (recorded) report["recorded_run_id"] = recorded->id;  // what `eval show` judges it against again
  if (!live.is_null() && !live.empty()) report["live"] = live;  // shadow traffic: reported, not gated
  record.report = report.dump(-1, ' ', false, json::error_handler_t::replace);
  LG_ASSIGN_OR_RETURN(run.id, store.add(record));
  return run;
}

}  // namespace loragate::eval
