// The evaluation history: stored runs read back, the recorded reference, judge and store.
#include "evaluator/run_history.h"

#include <chrono>

#include "common/sha256.h"
#include "evaluator/report.h"

namespace loragate::eval {

using nlohmann::json;

namespace {

int64_t seconds_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Result<RunResult> parse_stored(const EvaluationRecord& r) {
  const json report = json::parse(r.report, nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded()) return Status::corrupt("evaluation run " + std::to_string(r.id) + ": report is not JSON");
  LG_ASSIGN_OR_RETURN(RunResult run, run_from_json(report));
  run.id = r.id;
  // Written beside report_json's keys by judge_and_store.
  if (auto id = report.find("recorded_run_id"); id != report.end() && id->is_number_integer()) {
    run.recorded_run_id = id->get<int64_t>();
    run.recorded_arm = "online";  // runs stored before the arm was named compared against that
  }
  if (auto arm = report.find("recorded_arm"); arm != report.end() && arm->is_string()) {
    run.recorded_arm = arm->get<std::string>();
  }
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

Result<std::optional<RecordedRun>> recorded_run(EvaluationStore& store, const std::string& online_sha256,
                                                const std::string& suite_sha256) {
  LG_ASSIGN_OR_RETURN(std::optional<EvaluationRecord> r, store.latest_pass_measuring(online_sha256, suite_sha256));
  if (!r) return std::optional<RecordedRun>();
  LG_ASSIGN_OR_RETURN(RunResult run, parse_stored(*r));
  RecordedRun recorded{std::move(run), r->candidate_sha256 == online_sha256 ? "candidate" : "online", nullptr};
  if (recorded.arm == "candidate") {
    const json report = json::parse(r->report, nullptr, /*allow_exceptions=*/false);
    if (auto live = report.find("live"); live != report.end() && live->is_object() && !live->empty()) {
      recorded.live = *live;
    }
  }
  return std::optional<RecordedRun>(std::move(recorded));
}

Result<std::optional<RecordedRun>> stored_reference(EvaluationStore& store, const nlohmann::json& report) {
  if (!report.is_object()) return Status::corrupt("a stored report is not a JSON object");
  auto id = report.find("recorded_run_id");
  if (id == report.end() || id->is_null()) return std::optional<RecordedRun>();
  if (!id->is_number_integer()) return Status::corrupt("recorded_run_id: not an integer");
  std::string arm = "online";
  if (auto named = report.find("recorded_arm"); named != report.end() && !named->is_null()) {
    if (!named->is_string() || (*named != "online" && *named != "candidate")) {
      return Status::corrupt("recorded_arm: not \"online\" or \"candidate\"");
    }
    arm = named->get<std::string>();
  }
  LG_ASSIGN_OR_RETURN(EvaluationRecord record, store.get(id->get<int64_t>()));
  LG_ASSIGN_OR_RETURN(RunResult run, parse_stored(record));
  nlohmann::json live = report.contains("recorded_live") ? report["recorded_live"] : nlohmann::json();
  return std::optional<RecordedRun>(RecordedRun{std::move(run), std::move(arm), std::move(live)});
}

Result<RunResult> judge_and_store(RunResult run, const GateConfig& gates, EvaluationStore& store,
                                  const nlohmann::json& live) {
  // Every rule spelled out: the stored run is judged the same whatever later defaults say.
  run.gates_text = gates.to_yaml();
  run.gates_sha256 = sha256_hex(run.gates_text);
  LG_ASSIGN_OR_RETURN(std::optional<RecordedRun> recorded,
                      recorded_run(store, run.online_sha256, run.suite_sha256));
  if (recorded) {
    run.recorded_run_id = recorded->run.id;
    run.recorded_arm = recorded->arm;
  }
  run.gates = evaluate_gates(gates, run, recorded ? recorded->reference() : RecordedReference{});
  run.verdict = overall_verdict(run.gates);

  EvaluationRecord record;
  record.started_at = run.started_at;
  record.finished_at = seconds_now();
  record.online_base = run.online_base;
  record.online_sha256 = run.online_sha256;
  record.candidate_base = run.candidate_base;
  record.candidate_sha256 = run.candidate_sha256;
  record.adapters = adapters_json(run);
  record.suite_sha256 = run.suite_sha256;
  record.gates_sha256 = run.gates_sha256;
  record.verdict = verdict_name(run.verdict);
  json report = report_json(run);
  if (recorded) {  // what the recorded gates compared against, and what `eval show` judges it against again
    report["recorded_run_id"] = recorded->run.id;
    report["recorded_arm"] = recorded->arm;
    if (!recorded->live.is_null()) report["recorded_live"] = recorded->live;
  }
  if (!live.is_null() && !live.empty()) report["live"] = live;  // shadow traffic: reported, not gated
  record.report = report.dump(-1, ' ', false, json::error_handler_t::replace);
  LG_ASSIGN_OR_RETURN(run.id, store.add(record));
  return run;
}

}  // namespace loragate::eval
