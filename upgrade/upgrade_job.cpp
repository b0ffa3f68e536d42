#include "upgrade/upgrade_job.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "common/atomic_file.h"
#include "evaluator/report.h"
#include "upgrade/base_similarity.h"
#include "upgrade/retrain.h"

namespace loragate::eval {

namespace fs = std::filesystem;
using nlohmann::json;

struct UpgradeJobs::Plan {
  UpgradeStatus status;
  UpgradeRequest request;
  std::vector<RetrainSpec> specs;  // one per step; skipped steps' are empty
  RetrainBase base;                // the candidate, once loaded
  std::chrono::steady_clock::time_point last_write;
  std::chrono::steady_clock::time_point stage_start;
  std::optional<JobStatus> final_run;  // the transfer's run, when it judged every adapter the candidate ends with
};

namespace {

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

bool same_path(const std::string& a, const std::string& b) {
  std::error_code ea, eb;
  const fs::path ra = fs::weakly_canonical(a, ea), rb = fs::weakly_canonical(b, eb);
  return !ea && !eb ? ra == rb : fs::path(a).lexically_normal() == fs::path(b).lexically_normal();
}

}  // namespace

UpgradeJobs::UpgradeJobs(BaseSet* bases, Registry* registry, EvaluationJobs* evaluations, EvaluationStore* runs,
                         UpgradeStore* store, UpgradeHooks hooks, UpgradeOptions options)
    : bases_(bases),
      registry_(registry),
      evaluations_(evaluations),
      runs_(runs),
      store_(store),
      hooks_(std::move(hooks)),
      options_(std::move(options)) {
  // What an earlier process left running did not finish: say so, and let a new request resume it.
  Result<int64_t> interrupted = store_->mark_interrupted();
  if (!interrupted.is_ok()) {
    std::cerr << "loragate: unfinished upgrades not marked interrupted: " << interrupted.status().to_string() << "\n";
  } else if (*interrupted > 0) {
    std::cerr << "loragate: " << *interrupted << " upgrade(s) were interrupted by the last stop; "
              << "POST /admin/upgrades with the same candidate resumes one\n";
  }
}

UpgradeJobs::~UpgradeJobs() {
  cancel_all();
  if (worker_.joinable()) worker_.join();
}

void UpgradeJobs::cancel_all() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  shutting_down_.store(true);
  cancel_.store(true);
}

Result<UpgradeJobs::Plan> UpgradeJobs::plan(const UpgradeRequest& request, const ServingBase& serving) const {
  Plan p;
  p.request = request;
  if (p.request.suite_path.empty()) p.request.suite_path = options_.suite_path;
  if (p.request.gates_path.empty()) p.request.gates_path = options_.gates_path;
  if (p.request.suite_path.empty()) {
    return Status::failed_precondition("an upgrade is judged with the server's suite, and none is configured "
                                       "(evaluation.suite in the server's YAML)");
  }
  LG_ASSIGN_OR_RETURN(std::vector<ScenarioRecord> scenarios, registry_->list_scenarios(serving.name()));
  if (scenarios.empty()) {
    return Status::failed_precondition("no scenario is routed on the serving base '" + serving.name() +
                                       "': there is no adapter to retrain");
  }
  std::vector<std::string> untrained;
  for (const ScenarioRecord& s : scenarios) {
    UpgradeStep step;
    step.scenario = s.name;
    step.adapter = s.adapter;
    RetrainSpec spec;
    Result<TrainingSetRecord> t = registry_->get_training_set(s.name);
    if (t.is_ok()) {
      const json config = json::parse(t->config, nullptr, /*allow_exceptions=*/false);
      if (!config.is_object()) return Status::corrupt("scenario '" + s.name + "': its training config is not JSON");
      spec = RetrainSpec{s.name, t->path, t->sha256, config, ""};
      step.data_path = t->path;
      step.data_sha256 = t->sha256;
    } else if (t.status().code() == StatusCode::kNotFound) {
      // Without a training set a scenario can still be carried over (transfer-first);
      // it blocks the upgrade only if its adapter does not hold (retrain()).
      const bool can_transfer = request.strategy == UpgradeStrategy::kTransferFirst && !request.skip_untrained;
      if (!can_transfer) {
        untrained.push_back(s.name);
        step.state = "skipped";
        step.error = "no training set recorded";
      }
    } else {
      return t.status();
    }
    p.status.steps.push_back(std::move(step));
    p.specs.push_back(std::move(spec));
  }
  if (!untrained.empty() && !request.skip_untrained) {
    return Status::failed_precondition(
        "scenario(s) " + quoted_list(untrained) + " of the serving base have no training set, so their adapters " +
        "cannot be retrained: record one (loragate scenario set NAME ADAPTER --train FILE) or skip them " +
        "(skip_untrained / --skip-untrained)");
  }
  UpgradeRecord& r = p.status.record;
  r.candidate = request.candidate;
  r.candidate_path = request.path;
  r.online_base = serving.name();
  r.promote = request.promote;
  r.skip_untrained = request.skip_untrained;
  r.state = "queued";
  p.status.strategy = upgrade_strategy_name(request.strategy);
  for (const char* stage : {"base", "transfer", "retrain", "evaluate", "promote"}) p.status.stages.push_back({stage, "pending", 0, ""});
  return p;
}

Result<UpgradeStatus> UpgradeJobs::start(const UpgradeRequest& request) {
  std::lock_guard<std::mutex> one_start(start_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status::unavailable("the server is shutting down: no new upgrades");
    // One that has recorded its end is only leaving its thread: joined below.
    if (running_ != nullptr && upgrade_state_is_running(running_->record.state)) {
      return Status::failed_precondition("upgrade " + std::to_string(running_->record.id) + " of candidate '" +
                                         running_->record.candidate + "' is running; one runs at a time (DELETE " +
                                         "/admin/upgrades/" + std::to_string(running_->record.id) + " cancels it)");
    }
  }
  if (worker_.joinable()) worker_.join();  // the last one has ended: running_ is cleared at its very end

  LG_RETURN_IF_ERROR(validate_name("base model name", request.candidate, /*allow_slash=*/true));
  std::shared_ptr<ServingBase> serving = bases_->serving();
  if (serving == nullptr) return Status::failed_precondition("no base is serving");
  if (serving->name() == request.candidate) {
    return Status::failed_precondition("base '" + request.candidate + "' is the serving base: upgrade to another one");
  }
  for (const BaseStatus& b : bases_->list()) {
    if (b.name != request.candidate) continue;
    if (b.state == BaseState::kFailed) {
      return Status::failed_precondition("base '" + b.name + "' failed to load (" + b.error +
                                         "); remove it (DELETE /admin/bases/" + b.name + ") and ask again");
    }
    if (!same_path(b.path, request.path)) {
      return Status::failed_precondition("base '" + b.name + "' is loaded from " + b.path + ", not " + request.path);
    }
  }
  LG_ASSIGN_OR_RETURN(Plan p, plan(request, *serving));

  // An interrupted or cancelled upgrade of this candidate resumes under its id, with the steps it registered.
  LG_ASSIGN_OR_RETURN(std::vector<UpgradeRecord> earlier, store_->list(200));
  for (const UpgradeRecord& e : earlier) {
    if (e.candidate != request.candidate) continue;
    if (e.state == "interrupted" || e.state == "cancelled") {
      p.status.record.id = e.id;
      std::map<std::string, UpgradeStep> kept;
      for (UpgradeStep& s : upgrade_status_of(e).steps) kept[s.scenario] = std::move(s);
      for (UpgradeStep& step : p.status.steps) {
        auto it = kept.find(step.scenario);
        if (it != kept.end() && it->second.state == "registered" && it->second.data_sha256 == step.data_sha256 &&
            it->second.adapter == step.adapter) {
          step = it->second;  // checked again when the run reaches it
        }
      }
    }
    break;  // only the latest upgrade of the candidate
  }
  p.status.record.steps = upgrade_steps_text(p.status);
  if (p.status.record.id > 0) {
    LG_RETURN_IF_ERROR(store_->update(p.status.record));
  } else {
    LG_ASSIGN_OR_RETURN(p.status.record.id, store_->add(p.status.record));
  }
  LG_ASSIGN_OR_RETURN(p.status.record, store_->get(p.status.record.id));  // with the times the store set
  UpgradeStatus started = p.status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_ = std::make_unique<UpgradeStatus>(p.status);
  }
  cancel_.store(false);
  worker_ = std::thread([this, p = std::move(p)]() mutable { run(std::move(p)); });
  return started;
}

void UpgradeJobs::run(Plan plan) {
  // Retraining is minutes of CPU: at the lowest OS priority, live forward passes take the cores first.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  if (load_candidate(plan) && judge_base(plan) && transfer(plan) && retrain(plan) && evaluate(plan)) promote(plan);
  std::lock_guard<std::mutex> lock(mu_);
  running_.reset();
}

void UpgradeJobs::publish(Plan& plan, bool force) {
  plan.status.record.steps = upgrade_steps_text(plan.status);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (running_ != nullptr) *running_ = plan.status;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - plan.last_write < std::chrono::seconds(1)) return;
  plan.last_write = now;
  if (Status s = store_->update(plan.status.record); !s.is_ok()) {
    std::cerr << "loragate: upgrade " << plan.status.record.id << " not recorded: " << s.to_string() << "\n";
  }
}

void UpgradeJobs::finish(Plan& plan, const std::string& state, const std::string& error) {
  UpgradeRecord& r = plan.status.record;
  r.state = state;
  r.error = error;
  if (state == "cancelled" && shutting_down_.load()) {
    r.state = "interrupted";
    r.error = "the server shut down while it ran; ask for the same candidate again to resume";
  }
  for (UpgradeStage& s : plan.status.stages) {
    if (s.state == "running") end_stage(plan, s.name, state == "cancelled" ? "cancelled" : "failed");
  }
  if (state == "failed") {  // a scenario that had no outcome yet did not get its adapter
    for (UpgradeStep& step : plan.status.steps) {
      if (step.outcome.empty() && step.state != "skipped") step.outcome = "failed";
    }
  }
  publish(plan);
}

void UpgradeJobs::begin_stage(Plan& plan, const std::string& name) {
  for (UpgradeStage& s : plan.status.stages) {
    if (s.name == name) s.state = "running";
  }
  plan.stage_start = std::chrono::steady_clock::now();
  publish(plan);
}

void UpgradeJobs::end_stage(Plan& plan, const std::string& name, const std::string& state, const std::string& note) {
  for (UpgradeStage& s : plan.status.stages) {
    if (s.name != name) continue;
    if (s.state == "running") {
      s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - plan.stage_start).count();
    }
    s.state = state;
    if (!note.empty()) s.note = note;
  }
  publish(plan);
}

bool UpgradeJobs::load_candidate(Plan& plan) {
  const std::string& name = plan.request.candidate;
  if (!bases_->find(name).is_ok()) {
    bool known = false;
    for (const BaseStatus& b : bases_->list()) known = known || b.name == name;
    if (!known) {
      Status added = bases_->add(BaseSpec{name, plan.request.path, plan.request.dtype});
      if (hooks_.routes_changed) hooks_.routes_changed();
      if (!added.is_ok()) {
        finish(plan, "failed", "loading the candidate: " + added.message());
        return false;
      }
    }
    while (!bases_->wait_loaded(name, std::chrono::steady_clock::now() + std::chrono::milliseconds(200))) {
      if (cancelled()) {
        finish(plan, "cancelled", "cancelled while the candidate loaded");
        return false;
      }
      bool loading = false;
      for (const BaseStatus& b : bases_->list()) loading = loading || (b.name == name && b.state == BaseState::kLoading);
      if (!loading) break;
    }
  }
  Result<std::shared_ptr<ServingBase>> candidate = bases_->find(name);
  if (!candidate.is_ok()) {
    finish(plan, "failed", "the candidate did not load: " + candidate.status().message());
    return false;
  }
  plan.base.sha256 = (*candidate)->sha256();
  plan.base.gate = &bases_->compute_gate();
  plan.base.dir = plan.request.path;
  plan.base.dtype = plan.request.dtype;
  for (const BaseStatus& b : bases_->list()) {
    if (b.name != name) continue;
    plan.base.dir = b.path;
    if (Result<WeightType> t = parse_weight_type(b.dtype); t.is_ok()) plan.base.dtype = *t;
  }
  return true;
}

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

Result<std::string> UpgradeJobs::write_report(const Plan& plan, int64_t run_id,
                                              std::vector<std::string>* failing) const {
  LG_ASSIGN_OR_RETURN(EvaluationRecord run, runs_->get(run_id));
  json report = json::parse(run.report, nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded()) return Status::corrupt("evaluation run " + std::to_string(run_id) + ": report is not JSON");
  report["id"] = run_id;  // stored before the store gave it its id
  for (const json& g : report.value("gates", json::array())) {
    if (g.value("verdict", "") == "fail") failing->push_back(g.value("scenario", "") + "/" + g.value("metric", ""));
  }
  const fs::path dir = fs::path(options_.trained_dir) / plan.request.candidate;
  const std::string stem = "upgrade-" + std::to_string(plan.status.record.id) + "-run-" + std::to_string(run_id);
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string json_path = (dir / (stem + ".json")).string();
  LG_RETURN_IF_ERROR(write_file_atomic(json_path, report.dump(2, ' ', false, json::error_handler_t::replace)));
  LG_ASSIGN_OR_RETURN(RunResult parsed, run_from_json(report));  // and the page beside it
  parsed.id = run_id;
  LG_RETURN_IF_ERROR(write_file_atomic(upgrade_report_html_path(json_path), report_html(parsed)));
  return json_path;
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

void UpgradeJobs::promote(Plan& plan) {
  if (!plan.request.promote) {
    end_stage(plan, "promote", "skipped", "promote was not asked");
    return finish(plan, "passed", "");
  }
  begin_stage(plan, "promote");
  plan.status.record.state = "promoting";
  publish(plan);
  const Status swapped = hooks_.promote
                            ? hooks_.promote(plan.request.candidate, plan.request.actor)
                            : bases_->promote(plan.request.candidate, /*force=*/false, plan.request.actor).status();
  if (hooks_.routes_changed) hooks_.routes_changed();
  if (!swapped.is_ok()) return finish(plan, "failed", "the evaluation passed but promote was refused: " + swapped.message());
  end_stage(plan, "promote", "done");
  finish(plan, "promoted", "");
}

Result<UpgradeStatus> UpgradeJobs::get(int64_t id) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (running_ != nullptr && running_->record.id == id) return *running_;
  }
  LG_ASSIGN_OR_RETURN(UpgradeRecord record, store_->get(id));
  return upgrade_status_of(record);
}

Result<std::vector<UpgradeStatus>> UpgradeJobs::list() const {
  LG_ASSIGN_OR_RETURN(std::vector<UpgradeRecord> records, store_->list(50));
  std::vector<UpgradeStatus> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const UpgradeRecord& r : records) {
    out.push_back(running_ != nullptr && running_->record.id == r.id ? *running_ : upgrade_status_of(r));
  }
  return out;
}

Status UpgradeJobs::cancel(int64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (running_ != nullptr && running_->record.id == id) {
      cancel_.store(true);
      return Status::ok();
    }
  }
  return store_->get(id).status();  // not_found, or it has ended
}

}  // namespace loragate::eval
