#include "upgrade/evaluation_jobs.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "common/path_roots.h"
#include "common/sha256.h"
#include "evaluator/run_history.h"
#include "evaluator/runner.h"
#include "evaluator/suite.h"
#include "upgrade/promotion_check.h"

namespace loragate::eval {

using nlohmann::json;

namespace {

int64_t jobs_unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

EvaluationJobs::EvaluationJobs(BaseSet* bases, Registry* registry, EvaluationStore* store, EvaluationOptions options)
    : bases_(bases), registry_(registry), store_(store), options_(std::move(options)) {}

EvaluationJobs::~EvaluationJobs() {
  cancel_all();
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers.swap(workers_);
  }
  for (std::thread& w : workers) w.join();
}

void EvaluationJobs::cancel_all() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& [id, flag] : cancel_flags_) flag->store(true);
  }
  wake_.notify_all();
}

Status EvaluationJobs::cancel(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (jobs_.find(id) == jobs_.end()) {
    return Status::not_found("evaluation " + std::to_string(id) + " is not known to this server");
  }
  auto it = cancel_flags_.find(id);
  if (it == cancel_flags_.end()) return Status::ok();  // it has ended
  cancel_reasons_.emplace(id, "cancelled by request before the evaluation finished; run it again");
  it->second->store(true);
  return Status::ok();
}

std::string EvaluationJobs::cancel_reason_locked(int64_t id) const {
  auto it = cancel_reasons_.find(id);
  return it != cancel_reasons_.end() ? it->second
                                     : "the server shut down before the evaluation finished; run it again";
}

Status EvaluationJobs::room_for_one_more() const {
  if (stopping_) return Status::unavailable("the server is shutting down: no new evaluations");
  if (queue_.size() + static_cast<size_t>(loading_) >= kMaxQueued) {
    return Status::failed_precondition("too many evaluations queued (" + std::to_string(kMaxQueued) +
                                       " wait already): try again when one has finished");
  }
  return Status::ok();
}

Result<EvaluationJobs::Pending> EvaluationJobs::load(const std::string& candidate, const std::string& suite_path,
                                                     const std::string& gates_path,
                                                     const std::vector<std::string>& roots, EvaluationScope scope) {
  std::shared_ptr<ServingBase> online = bases_->serving();
  if (online == nullptr) return Status::failed_precondition("no base is serving");
  LG_ASSIGN_OR_RETURN(std::shared_ptr<ServingBase> cand, bases_->find(candidate));
  if (cand == online) return Status::failed_precondition("base '" + candidate + "' is the serving base");
  std::lock_guard<std::mutex> one_at_a_time(load_mu_);
  // The YAML first: every scenario must be routed on both bases before a file it names is read.
  LG_ASSIGN_OR_RETURN(Suite suite, read_suite_spec(suite_path, roots));
  const bool base_only = scope == EvaluationScope::kBaseOnly;
  for (const ScenarioSpec& s : suite.scenarios) {
    if (base_only) break;  // no adapter is used: the scenarios are prompts only
    for (const ServingBase* b : {online.get(), cand.get()}) {
      LG_RETURN_IF_ERROR(routed_adapter(*registry_, s.name, b->name())
                             .status()
                             .with_context("suite scenario '" + s.name + "' on base '" + b->name() +
                                           "' (PUT /admin/scenarios/" + s.name + " with base)"));
    }
  }
  LG_RETURN_IF_ERROR(load_suite_items(&suite, roots));
  GateConfig gates = GateConfig::defaults();
  if (!gates_path.empty()) {
    LG_ASSIGN_OR_RETURN(std::string text, read_regular_file(gates_path, kMaxGatesFileBytes, "gates file", roots));
    LG_ASSIGN_OR_RETURN(gates, GateConfig::parse(text, gates_path));
  }
  if (base_only) {  // the gates that need an adapter (or its latencies) have nothing to judge
    gates.adapter = {};
    gates.recorded = {};
    gates.latency = {};
  }
  return Pending{0, std::move(suite), std::move(gates), std::move(online), std::move(cand), scope};
}

Result<JobStatus> EvaluationJobs::start(const std::string& candidate, const std::string& suite_path,
                                        const std::string& gates_path, const std::vector<std::string>& roots,
                                        EvaluationScope scope) {
  {  // Refused before a byte is read when it could not wait anyway.
    std::lock_guard<std::mutex> lock(mu_);
    LG_RETURN_IF_ERROR(room_for_one_more());
    ++loading_;
  }
  Result<Pending> loaded = load(candidate, suite_path, gates_path, roots.empty() ? options_.roots : roots, scope);
  std::lock_guard<std::mutex> lock(mu_);
  --loading_;
  if (!loaded.is_ok()) return loaded.status();
  if (stopping_) return Status::unavailable("the server is shutting down: no new evaluations");
  JobStatus job;
  job.id = next_id_++;
  job.candidate = candidate;
  job.online = loaded->online->name();
  jobs_[job.id] = job;
  loaded->id = job.id;
  cancel_flags_[job.id] = loaded->cancel;
  queue_.push_back(std::move(loaded).value());
  // A worker per evaluation that may run now, up to max_running; they stay for later ones.
  const size_t max_running = static_cast<size_t>(std::max<int32_t>(1, options_.max_running));
  if (workers_.size() < max_running) workers_.emplace_back([this] { worker_main(); });
  wake_.notify_one();
  return job;
}

void EvaluationJobs::update(int64_t id, const std::function<void(JobStatus&)>& change) {
  std::lock_guard<std::mutex> lock(mu_);
  change(jobs_[id]);
}

void EvaluationJobs::worker_main() {
  // The worker's own CPU work (encoding, scoring every item, the gates'
  // bootstrap) runs at the lowest OS priority, so on a machine whose cores
  // the live forward passes use it yields to them at once. Best effort.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left to record
    Pending job = std::move(queue_.front());
    queue_.pop_front();
    const bool cancelled = stopping_ || job.cancel->load();
    if (!cancelled) jobs_[job.id].state = "running";
    const int64_t id = job.id;
    lock.unlock();
    if (cancelled) {
      store_cancelled(job, jobs_unix_seconds());  // queued behind a run when the server stopped, or cancelled
    } else {
      run_job(std::move(job));
    }
    lock.lock();
    cancel_flags_.erase(id);
  }
}

void EvaluationJobs::run_job(Pending job) {
  const int64_t id = job.id;
  const int64_t started_at = jobs_unix_seconds();
  auto online_arm = serving_base_arm(job.online, job.cancel.get());
  auto candidate_arm = serving_base_arm(job.candidate, job.cancel.get());
  RunnerOptions options;
  options.base_only = job.scope == EvaluationScope::kBaseOnly;
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
  // The online arm ran in the live batch, the candidate's under candidate_share of the compute gate:
  // their latencies measure the scheduler, not the bases, so the latency gates skip them.
  if (run.is_ok()) run->latency_biased = true;
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
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(mu_);
    now = jobs_[job.id];
    reason = cancel_reason_locked(job.id);
  }
  EvaluationRecord record;
  record.started_at = started_at;
  record.finished_at = jobs_unix_seconds();
  record.online_base = job.online->name();
  record.online_sha256 = job.online->sha256();
  record.candidate_base = job.candidate->name();
  record.candidate_sha256 = job.candidate->sha256();
  record.adapters = "{}";
  record.suite_sha256 = suite_sha256(job.suite);
  record.gates_sha256 = sha256_hex(job.gates.to_yaml());
  record.verdict = "cancelled";
  record.report = json{{"cancelled", true},
                       {"reason", reason},
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

}  // namespace loragate::eval
