// The stages of an upgrade from base to evaluate (upgrade_job.h describes
// them); upgrade_job.cpp starts, publishes, finishes and promotes.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <thread>

#include "evaluator/report.h"
#include "upgrade/base_similarity.h"
#include "upgrade/upgrade_plan.h"

namespace loragate::eval {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace upgrade_detail;

bool UpgradeJobs::judge_base(Plan& plan) {
  begin_stage(plan, "base");
  plan.status.record.state = "judging_base";
  std::optional<JobStatus> run = run_evaluation(plan, EvaluationScope::kBaseOnly);
  if (!run) return false;
  if (run->verdict != "fail") {
    end_stage(plan, "base", "done", "the base-quality gates: " + run->verdict + " (run " + std::to_string(run->run_id) + ")");
    return true;
  }
  // Rejected before any adapter was trained: the record shows this run's report.
  std::vector<std::string> failing;
  Result<std::string> report = write_report(plan, run->run_id, &failing);
  if (report.is_ok()) plan.status.record.report = *report;
  plan.status.record.evaluation = run->run_id;
  plan.status.record.verdict = run->verdict;
  end_stage(plan, "base", "failed", "failing gates: " + quoted_list(failing));
  finish(plan, "failed",
         "the candidate base fails the gates that need no adapter (run " + std::to_string(run->run_id) +
             "): failing gates: " + quoted_list(failing) + "; no adapter was trained");
  return false;
}

bool UpgradeJobs::transfer(Plan& plan) {
  if (plan.request.strategy != UpgradeStrategy::kTransferFirst) {
    end_stage(plan, "transfer", "skipped", "strategy retrain-all");
    return true;
  }
  begin_stage(plan, "transfer");
  plan.status.record.state = "transferring";
  const std::string& candidate = plan.request.candidate;
  std::shared_ptr<ServingBase> online = bases_->serving();
  Result<std::shared_ptr<ServingBase>> cand = bases_->find(candidate);
  if (online != nullptr && cand.is_ok()) {
    plan.status.similarity = similarity_json(compare_bases(online->loop().model().weights(),
                                                           (*cand)->loop().model().weights()));
    publish(plan);
  }
  // Carry each scenario's online adapter over as it is. One that does not load
  // on the candidate (other shapes) is left to the retrain stage.
  std::vector<UpgradeStep*> tried;
  for (UpgradeStep& step : plan.status.steps) {
    if (step.state == "skipped" || step.state == "registered") continue;  // kept from an interrupted run
    if (cancelled()) {
      finish(plan, "cancelled", "cancelled while the online adapters were carried over");
      return false;
    }
    Result<AdapterRecord> a = registry_->get_adapter(step.adapter, plan.status.record.online_base);
    if (!a.is_ok()) {
      step.transfer = "not tried: " + a.status().message();
      continue;
    }
    step.online_dir = a->path;
    step.out_dir = a->path;
    step.state = "transferring";
    if (Status s = register_step(plan, step, step.online_dir); !s.is_ok()) {
      step.state = "pending";
      step.out_dir.clear();
      step.transfer = "does not load on the candidate: " + s.message();
      continue;
    }
    tried.push_back(&step);
  }
  if (tried.empty()) {
    end_stage(plan, "transfer", "done", "no online adapter could be carried over");
    return true;
  }
  std::optional<JobStatus> run = run_evaluation(plan, EvaluationScope::kFull);
  if (!run) return false;
  Result<std::map<std::string, Verdict>> verdicts = scenario_verdicts(run->run_id);
  if (!verdicts.is_ok()) {
    finish(plan, "failed", "reading the transfer's run: " + verdicts.status().message());
    return false;
  }
  int held = 0;
  for (UpgradeStep* step : tried) {
    auto it = verdicts->find(step->scenario);
    const Verdict v = it != verdicts->end() ? it->second : Verdict::kInconclusive;
    step->transfer = verdict_name(v);
    if (v == Verdict::kPass) {
      step->outcome = "transferred";
      ++held;
    } else {
      step->state = "pending";  // retrained next, starting from this adapter
      step->out_dir.clear();
    }
  }
  bool all_final = true;  // every scenario's adapter on the candidate is what this run judged
  for (const UpgradeStep& step : plan.status.steps) all_final = all_final && (step.state != "pending");
  if (all_final) plan.final_run = run;
  end_stage(plan, "transfer", "done",
            std::to_string(held) + " of " + std::to_string(tried.size()) + " adapters held (run " +
                std::to_string(run->run_id) + ")");
  return true;
}

bool UpgradeJobs::retrain(Plan& plan) {
  std::vector<size_t> todo;
  for (size_t i = 0; i < plan.status.steps.size(); ++i) {
    const UpgradeStep& step = plan.status.steps[i];
    if (step.state == "skipped" || step.outcome == "transferred") continue;
    if (step.state == "registered") {  // kept from the interrupted run: still what the registry routes?
      Result<AdapterRecord> a = registry_->get_adapter(step.adapter, plan.request.candidate);
      Result<std::string> routed = registry_->resolve_scenario(step.scenario, plan.request.candidate);
      if (a.is_ok() && routed.is_ok() && *routed == step.adapter && same_path(a->path, step.out_dir)) continue;
    }
    todo.push_back(i);
  }
  if (todo.empty()) {
    end_stage(plan, "retrain", "skipped", "every adapter held on the candidate");
    return true;
  }
  begin_stage(plan, "retrain");
  plan.status.record.state = "training";
  publish(plan);
  const std::string root = (fs::path(options_.trained_dir) / plan.request.candidate).string();
  for (size_t i : todo) {
    UpgradeStep& step = plan.status.steps[i];
    if (cancelled()) {
      finish(plan, "cancelled", "cancelled before scenario '" + step.scenario + "' was retrained");
      return false;
    }
    if (plan.specs[i].data_path.empty()) {  // carried over, did not hold, and nothing to retrain it from
      step.outcome = "failed";
      step.error = "its online adapter did not hold on the candidate (" +
                   (step.transfer.empty() ? std::string("not tried") : step.transfer) +
                   ") and it has no training set to retrain from";
      end_stage(plan, "retrain", "failed", "scenario '" + step.scenario + "' has no training set");
      finish(plan, "failed",
             "scenario '" + step.scenario + "': " + step.error +
                 ": record one (loragate scenario set NAME ADAPTER --train FILE) or skip it (skip_untrained)");
      return false;
    }
    step.state = "training";
    step.error.clear();
    publish(plan);
    auto on_step = [&](const train::TrainProgress& p) {
      step.step = p.step;
      step.total_steps = p.total_steps;
      step.loss = p.loss;
      if (p.step <= 1 || step.first_loss == 0) step.first_loss = p.loss;
      step.tokens_per_s = p.tokens_per_s;
      step.eta_s = p.eta_s;
      publish(plan, /*force=*/false);
    };
    RetrainSpec spec = plan.specs[i];
    // Warm start from the adapter that was carried over (and loaded there), not from scratch.
    const bool carried = step.transfer == "fail" || step.transfer == "inconclusive";
    if (plan.request.strategy == UpgradeStrategy::kTransferFirst && carried) spec.init_from = step.online_dir;
    Result<RetrainOutcome> out = retrain_adapter(plan.base, spec, root, options_.training_roots, on_step, &cancel_);
    if (!out.is_ok()) {
      const bool was_cancelled = cancelled() || out.status().code() == StatusCode::kCancelled;
      step.state = was_cancelled ? "cancelled" : "failed";
      step.error = out.status().message();
      finish(plan, was_cancelled ? "cancelled" : "failed",
             was_cancelled ? "cancelled while scenario '" + step.scenario + "' was retrained (resumable)"
                           : out.status().message());
      return false;
    }
    step.out_dir = out->dir;
    step.reused = out->reused;
    if (out->steps > 0) step.step = step.total_steps = out->steps;
    if (out->first_loss != 0) step.first_loss = out->first_loss;
    if (out->last_loss != 0) step.loss = out->last_loss;
    if (Status s = register_step(plan, step, step.out_dir); !s.is_ok()) {
      step.state = "failed";
      step.error = "registering the retrained adapter: " + s.message();
      finish(plan, "failed", "scenario '" + step.scenario + "': " + step.error);
      return false;
    }
    step.outcome = "retrained";
    publish(plan);
  }
  end_stage(plan, "retrain", "done", std::to_string(todo.size()) + " adapter(s) retrained");
  return true;
}

Status UpgradeJobs::register_step(Plan& plan, UpgradeStep& step, const std::string& dir) {
  const std::string& candidate = plan.request.candidate;
  Result<AdapterRecord> existing = registry_->get_adapter(step.adapter, candidate);
  if (!existing.is_ok() || !same_path(existing->path, dir)) {
    // Another version of the adapter is on the candidate: the scenarios using it there move to the new one.
    std::vector<ScenarioRecord> users;
    std::vector<TrainingSetRecord> their_training;
    if (existing.is_ok()) {
      LG_ASSIGN_OR_RETURN(std::vector<ScenarioRecord> all, registry_->list_scenarios(candidate));
      for (const ScenarioRecord& s : all) {
        if (s.adapter != step.adapter) continue;
        users.push_back(s);
        // Removing a scenario may remove its name's training set (the last of its name): kept to restore.
        if (Result<TrainingSetRecord> t = registry_->get_training_set(s.name); t.is_ok()) their_training.push_back(*t);
        LG_RETURN_IF_ERROR(registry_->remove_scenario(s.name, candidate));
      }
      LG_RETURN_IF_ERROR(hooks_.unregister_adapter(step.adapter, candidate));
    }
    Result<AdapterRecord> added = hooks_.register_adapter(step.adapter, dir, candidate);
    // The version just removed leaves the candidate's adapter cache at its next
    // housekeeping, once no sequence holds it (the transfer's evaluation may
    // have a moment ago): wait for that rather than fail the upgrade.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!added.is_ok() && added.status().code() == StatusCode::kFailedPrecondition &&
           added.status().message().find("still being removed") != std::string::npos &&
           std::chrono::steady_clock::now() < deadline && !cancelled()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      added = hooks_.register_adapter(step.adapter, dir, candidate);
    }
    for (const ScenarioRecord& s : users) (void)registry_->set_scenario(s.name, candidate, s.adapter);
    for (const TrainingSetRecord& t : their_training) (void)registry_->set_training_set(t);
    LG_RETURN_IF_ERROR(added.status());
  }
  Result<ScenarioRecord> routed = registry_->set_scenario(step.scenario, candidate, step.adapter);
  if (hooks_.routes_changed) hooks_.routes_changed();
  LG_RETURN_IF_ERROR(routed.status());
  step.state = "registered";
  publish(plan);
  return Status::ok();
}

std::optional<JobStatus> UpgradeJobs::run_evaluation(Plan& plan, EvaluationScope scope) {
  Result<JobStatus> job = evaluations_->start(plan.request.candidate, plan.request.suite_path,
                                              plan.request.gates_path, options_.eval_roots, scope);
  if (!job.is_ok()) {
    finish(plan, "failed", "the evaluation did not start: " + job.status().message());
    return std::nullopt;
  }
  JobStatus now = *job;
  bool asked_to_cancel = false;
  while (now.state == "queued" || now.state == "running") {
    std::this_thread::sleep_for(options_.poll);
    if (cancelled() && !asked_to_cancel) {
      asked_to_cancel = true;
      (void)evaluations_->cancel(now.id);
    }
    Result<JobStatus> again = evaluations_->get(now.id);
    if (!again.is_ok()) {
      finish(plan, "failed", "the evaluation vanished: " + again.status().message());
      return std::nullopt;
    }
    now = *again;
    if (now.done != plan.status.eval_done || now.total != plan.status.eval_total) {
      plan.status.eval_done = now.done;
      plan.status.eval_total = now.total;
      publish(plan);
    }
  }
  plan.status.eval_done = plan.status.eval_total = 0;
  if (now.state == "cancelled") {
    finish(plan, "cancelled", "cancelled while the evaluation ran (evaluation " + std::to_string(now.id) + ")");
    return std::nullopt;
  }
  if (now.state != "done") {
    finish(plan, "failed", "the evaluation failed: " + now.error);
    return std::nullopt;
  }
  return now;
}

Result<std::map<std::string, Verdict>> UpgradeJobs::scenario_verdicts(int64_t run_id) const {
  LG_ASSIGN_OR_RETURN(EvaluationRecord record, runs_->get(run_id));
  const json report = json::parse(record.report, nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded()) return Status::corrupt("evaluation run " + std::to_string(run_id) + ": report is not JSON");
  LG_ASSIGN_OR_RETURN(RunResult run, run_from_json(report));
  std::map<std::string, std::vector<GateResult>> by_scenario;
  for (const GateResult& g : run.gates) {
    if (g.scenario == "generic" || g.metric.rfind("no_adapter.", 0) == 0) continue;  // the base's, judged before
    by_scenario[g.scenario].push_back(g);
  }
  std::map<std::string, Verdict> out;
  for (const auto& [scenario, gates] : by_scenario) out[scenario] = overall_verdict(gates);
  return out;
}

bool UpgradeJobs::evaluate(Plan& plan) {
  begin_stage(plan, "evaluate");
  plan.status.record.state = "evaluating";
  std::optional<JobStatus> now = plan.final_run;
  const bool reused = now.has_value();
  if (!now) now = run_evaluation(plan, EvaluationScope::kFull);
  if (!now) return false;
  plan.status.record.evaluation = now->run_id;
  plan.status.record.verdict = now->verdict;
  std::vector<std::string> failing;
  Result<std::string> report = write_report(plan, now->run_id, &failing);
  if (report.is_ok()) plan.status.record.report = *report;
  const std::string note = now->verdict + " (run " + std::to_string(now->run_id) +
                           (reused ? ", the transfer's: every adapter there was judged in it)" : ")");
  if (now->verdict != "pass") {
    end_stage(plan, "evaluate", "failed", note);
    std::string why = "the evaluation's verdict is " + now->verdict + " (run " + std::to_string(now->run_id) + ")";
    if (!failing.empty()) why += ": failing gates: " + quoted_list(failing);
    finish(plan, "failed", why);
    return false;
  }
  end_stage(plan, "evaluate", "done", note);
  if (!report.is_ok()) std::cerr << "loragate: upgrade report not written: " << report.status().to_string() << "\n";
  return true;
}

}  // namespace loragate::eval
