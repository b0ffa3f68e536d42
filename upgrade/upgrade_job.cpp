#include "upgrade/upgrade_job.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>

#include "common/atomic_file.h"
#include "evaluator/report.h"
#include "upgrade/retrain.h"
#include "upgrade/upgrade_plan.h"

namespace loragate::eval {

namespace fs = std::filesystem;
using nlohmann::json;

using namespace upgrade_detail;

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
