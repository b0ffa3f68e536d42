#include "evaluator/evaluation_jobs.h"

#include <chrono>

#include "evaluator/report.h"
#include "evaluator/runner.h"
#include "evaluator/suite.h"
#include "common/sha256.h"

namespace loragate::eval {

using nlohmann::json;

namespace {

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Result<RunResult> parse_stored(const EvaluationRecord& r) {
  const json report = json::parse(r.report, nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded()) return Status::corrupt("evaluation run " + std::to_string(r.id) + ": report is not JSON");
  LG_ASSIGN_OR_RETURN(RunResult run, run_from_json(report));
  run.id = r.id;
  return run;
}

// The adapter the registry routes `scenario` to on `base`, with its directory and sha256.
Result<AdapterRecord> routed_adapter(Registry& registry, const std::string& scenario, const std::string& base) {
  LG_ASSIGN_OR_RETURN(std::string name, registry.resolve_scenario(scenario, base));
  return registry.get_adapter(name, base);
}

}  // namespace

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
  run.gates = evaluate_gates(gates, run, recorded ? &*recorded : nullptr);
  run.verdict = overall_verdict(run.gates);

  EvaluationRecord record;
  record.started_at = run.started_at;
  record.finished_at = unix_seconds();
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

EvaluationJobs::EvaluationJobs(BaseSet* bases, Registry* registry, EvaluationStore* store)
    : bases_(bases), registry_(registry), store_(store) {}

EvaluationJobs::~EvaluationJobs() {
  cancel_all();
  std::thread worker;
  {
    std::lock_guard<std::mutex> lock(mu_);
    worker.swap(worker_);
  }
  if (worker.joinable()) worker.join();
}

void EvaluationJobs::cancel_all() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cancel_running_.store(true);
  wake_.notify_all();
}

Result<JobStatus> EvaluationJobs::start(const std::string& candidate, const std::string& suite_path,
                                        const std::string& gates_path) {
  LG_ASSIGN_OR_RETURN(Suite suite, load_suite(suite_path));
  GateConfig gates = GateConfig::defaults();
  if (!gates_path.empty()) {
    LG_ASSIGN_OR_RETURN(gates, GateConfig::load(gates_path));
  }
  std::shared_ptr<ServingBase> online = bases_->serving();
  if (online == nullptr) return Status::failed_precondition("no base is serving");
  LG_ASSIGN_OR_RETURN(std::shared_ptr<ServingBase> cand, bases_->find(candidate));
  if (cand == online) return Status::failed_precondition("base '" + candidate + "' is the serving base");
  // Every scenario must be routed on both bases before anything runs.
  for (const ScenarioSpec& s : suite.scenarios) {
    for (const ServingBase* b : {online.get(), cand.get()}) {
      LG_RETURN_IF_ERROR(routed_adapter(*registry_, s.name, b->name())
                             .status()
                             .with_context("suite scenario '" + s.name + "' on base '" + b->name() +
                                           "' (PUT /admin/scenarios/" + s.name + " with base)"));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return Status::unavailable("the server is shutting down: no new evaluations");
  JobStatus job;
  job.id = next_id_++;
  job.candidate = candidate;
  job.online = online->name();
  jobs_[job.id] = job;
  queue_.push_back(Pending{job.id, std::move(suite), std::move(gates), std::move(online), std::move(cand)});
  if (!worker_.joinable()) worker_ = std::thread([this] { worker_main(); });
  wake_.notify_all();
  return job;
}

void EvaluationJobs::update(int64_t id, const std::function<void(JobStatus&)>& change) {
  std::lock_guard<std::mutex> lock(mu_);
  change(jobs_[id]);
}

void EvaluationJobs::worker_main() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left to record
    Pending job = std::move(queue_.front());
    queue_.pop_front();
    const bool cancelled = stopping_;
    lock.unlock();
    if (cancelled) {
      store_cancelled(job, unix_seconds());  // queued behind a run when the server stopped
    } else {
      run_job(std::move(job));
    }
    lock.lock();
  }
}

void EvaluationJobs::run_job(Pending job) {
  const int64_t id = job.id;
  const int64_t started_at = unix_seconds();
  auto online_arm = serving_base_arm(job.online, &cancel_running_);
  auto candidate_arm = serving_base_arm(job.candidate, &cancel_running_);
  RunnerOptions options;
  options.adapter_for = [&](const std::string& scenario, bool cand) -> Result<AdapterChoice> {
    LG_ASSIGN_OR_RETURN(AdapterRecord a,
                        routed_adapter(*registry_, scenario, (cand ? job.candidate : job.online)->name()));
    return AdapterChoice{a.name, a.path};
  };
  options.progress = [&](int64_t done, int64_t total) {
    update(id, [&](JobStatus& j) {
      j.done = done;
      j.total = total;
    });
  };
  Result<RunResult> run = run_suite(job.suite, *online_arm, *candidate_arm, options);
  if (!run.is_ok() && run.status().code() == StatusCode::kCancelled) return store_cancelled(job, started_at);
  const nlohmann::json live = live_source_ ? live_source_(job.candidate->name()) : nlohmann::json();
  if (run.is_ok()) run = judge_and_store(std::move(run).value(), job.gates, *store_, live);
  update(id, [&](JobStatus& j) {
    if (run.is_ok()) {
      j.state = "done";
      j.verdict = verdict_name(run->verdict);
      j.run_id = run->id;
    } else {
      j.state = "failed";
      j.error = run.status().to_string();
    }
  });
}

void EvaluationJobs::store_cancelled(const Pending& job, int64_t started_at) {
  JobStatus now;
  {
    std::lock_guard<std::mutex> lock(mu_);
    now = jobs_[job.id];
  }
  EvaluationRecord record;
  record.started_at = started_at;
  record.finished_at = unix_seconds();
  record.online_base = job.online->name();
  record.online_sha256 = job.online->sha256();
  record.candidate_base = job.candidate->name();
  record.candidate_sha256 = job.candidate->sha256();
  record.adapters = "{}";
  record.suite_sha256 = sha256_hex(job.suite.text);
  record.gates_sha256 = sha256_hex(job.gates.to_yaml());
  record.verdict = "cancelled";
  record.report = json{{"cancelled", true},
                       {"reason", "the server shut down before the evaluation finished; run it again"},
                       {"suite_path", job.suite.path},
                       {"done", now.done},
                       {"total", now.total}}
                      .dump();
  Result<int64_t> stored = store_->add(record);
  update(job.id, [&](JobStatus& j) {
    j.state = "cancelled";
    if (stored.is_ok()) {
      j.run_id = *stored;
    } else {
      j.error = "cancelled; not stored: " + stored.status().to_string();
    }
  });
}

Result<JobStatus> EvaluationJobs::get(int64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Status::not_found("evaluation " + std::to_string(id) + " is not known to this server");
  return it->second;
}

std::vector<JobStatus> EvaluationJobs::list() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<JobStatus> out;
  for (const auto& [id, j] : jobs_) out.push_back(j);
  return out;
}

Status EvaluationJobs::check_promotion(const ServingBase& serving, const ServingBase& candidate) const {
  const std::string who = "base '" + candidate.name() + "' (" + candidate.sha256().substr(0, 8) +
                          ") against the serving base '" + serving.name() + "' (" + serving.sha256().substr(0, 8) + ")";
  LG_ASSIGN_OR_RETURN(std::optional<EvaluationRecord> pass, store_->latest_pass(candidate.sha256(), serving.sha256()));
  if (!pass) {
    return Status::failed_precondition("no passing evaluation of " + who +
                                       ": run one (POST /admin/evaluations, or loragate eval run --url) or "
                                       "promote with force");
  }
  LG_ASSIGN_OR_RETURN(RunResult run, parse_stored(*pass));
  std::vector<std::string> changed;
  for (const ScenarioResult& s : run.scenarios) {
    for (auto [arm, base] : {std::pair<const char*, const ServingBase*>{"online", &serving}, {"candidate", &candidate}}) {
      auto it = s.arms.find(arm);
      if (it == s.arms.end()) continue;
      Result<AdapterRecord> now = routed_adapter(*registry_, s.name, base->name());
      if (!now.is_ok() || now->sha256 != it->second.adapter_sha256) {
        changed.push_back("scenario '" + s.name + "' on '" + base->name() + "'");
      }
    }
  }
  if (!changed.empty()) {
    std::string list;
    for (const std::string& c : changed) list += (list.empty() ? "" : ", ") + c;
    return Status::failed_precondition("evaluation run " + std::to_string(run.id) + " of " + who +
                                       " passed, but the adapters of " + list +
                                       " changed since; evaluate again or promote with force");
  }
  return Status::ok();
}

}  // namespace loragate::eval
