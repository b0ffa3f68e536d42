// EvaluationJobs: evaluations inside a running server. start() judges a
// loaded candidate base against the serving one in the background: at most
// EvaluationOptions::max_running evaluations run at once, each on its own
// worker; later ones wait "queued" (at most kMaxQueued, beyond that start()
// is refused) and run in order. The online arm runs on the serving base's
// loop beside live traffic (one evaluation request at a time, so it never
// holds more than one sequence of the serving batch), the candidate arms on
// the candidate's loop (below the serving base in the compute gate), so the
// two arms' latencies are not comparable: runs are marked latency_biased.
// Each scenario's adapter on a base is the one the registry routes that
// scenario to there. The run is judged with the gates, stored in the
// history, and its status kept for GET.
//
// The suite and gates files are hostile input (an admin client names them):
// start() reads the suite's YAML first, checks every scenario is routed on
// both bases, and only then reads the eval files it names, each inside the
// roots (suite.h has the caps).
//
// Whether a run authorises a promote is promotion_check.h's question.
// cancel_all() (shutdown) ends the running evaluations at their next
// engine request and drops the queued ones; each is stored with the verdict
// "cancelled" so the history shows it and it can be run again. cancel(id)
// does the same to one evaluation (an upgrade that is cancelled).
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bases/base_set.h"
#include "evaluator/gates.h"
#include "registry/evaluation_store.h"
#include "registry/registry.h"

namespace loragate::eval {

// How a server runs evaluations (the YAML's `evaluation:` section).
struct EvaluationOptions {
  std::vector<std::string> roots;  // every file a suite names must lie inside one (empty: start()'s roots)
  int32_t max_running = 1;         // evaluations running at once; later ones queue
};

// What an evaluation runs: the whole comparison, or the two bases on their
// own (the arms without adapter and the generic set, judged by the
// base-quality gates alone): an upgrade's first stage, before any adapter
// exists for the candidate. A base-only run never authorises a promotion
// (it covers no adapter, promotion_check.h (c)).
enum class EvaluationScope { kFull, kBaseOnly };

struct JobStatus {
  int64_t id = 0;
  std::string candidate, online;
  std::string state = "queued";   // "queued", "running", "done", "failed", "cancelled"
  int64_t done = 0, total = 0;    // units of work
  std::string verdict;            // when done
  int64_t run_id = 0;             // the stored run, when done or cancelled
  std::string error;              // when failed
};

class EvaluationJobs {
 public:
  // None owned; all outlive the jobs.
  EvaluationJobs(BaseSet* bases, Registry* registry, EvaluationStore* store, EvaluationOptions options = {});
  ~EvaluationJobs();  // cancel_all(), then joins the workers
  EvaluationJobs(const EvaluationJobs&) = delete;
  EvaluationJobs& operator=(const EvaluationJobs&) = delete;

  // Evaluations waiting for a worker; one more is refused (failed_precondition).
  static constexpr size_t kMaxQueued = 16;
  // The most a gates file may hold: a few dozen rules.
  static constexpr int64_t kMaxGatesFileBytes = int64_t{1} << 20;

  // Loads the suite and gates now (errors at once), then runs in the
  // background. Every file the suite names, and the gates file, must lie
  // inside `roots` (the admin API's evaluation.roots), or inside
  // EvaluationOptions::roots when `roots` is empty; with neither, any file.
  Result<JobStatus> start(const std::string& candidate, const std::string& suite_path, const std::string& gates_path,
                          const std::vector<std::string>& roots = {},
                          EvaluationScope scope = EvaluationScope::kFull);
  Result<JobStatus> get(int64_t id) const;
  std::vector<JobStatus> list() const;
  // Cancels the running evaluations and every queued one; later start()s are refused.
  // Returns at once: the running ones end at their next engine request.
  void cancel_all();
  // Cancels evaluation `id`, queued or running, as cancel_all() does; it
  // ends "cancelled" (stored so). not_found when unknown; ok when it had ended.
  Status cancel(int64_t id);

  // Where a run's live arm comes from: the shadow traffic figures of a candidate. Before start().
  void set_live_source(std::function<nlohmann::json(const std::string& candidate)> source) {
    live_source_ = std::move(source);
  }

 private:
  struct Pending {
    int64_t id = 0;
    Suite suite;
    GateConfig gates;
    std::shared_ptr<ServingBase> online, candidate;
    EvaluationScope scope = EvaluationScope::kFull;
    // Read by the job's arms between and during requests; set by cancel(id) or cancel_all().
    std::shared_ptr<std::atomic<bool>> cancel = std::make_shared<std::atomic<bool>>(false);
  };
  // Whether one more evaluation may wait; mu_ held.
  Status room_for_one_more() const;
  Result<Pending> load(const std::string& candidate, const std::string& suite_path, const std::string& gates_path,
                       const std::vector<std::string>& roots, EvaluationScope scope);
  void worker_main();
  void run_job(Pending job);
  // Stores `job` as cancelled after `done` of `total` units (started at `started_at`).
  void store_cancelled(const Pending& job, int64_t started_at);
  // Why job `id` was cancelled, for its stored record; mu_ held.
  std::string cancel_reason_locked(int64_t id) const;
  void update(int64_t id, const std::function<void(JobStatus&)>& change);

  BaseSet* bases_;
  Registry* registry_;
  EvaluationStore* store_;
  const EvaluationOptions options_;
  std::function<nlohmann::json(const std::string&)> live_source_;
  mutable std::mutex mu_;
  std::map<int64_t, JobStatus> jobs_;  // guarded by mu_
  int64_t next_id_ = 1;                // guarded by mu_
  std::condition_variable wake_;
  std::deque<Pending> queue_;          // guarded by mu_
  int32_t loading_ = 0;                // start()s between their room check and the queue; guarded by mu_
  bool stopping_ = false;              // guarded by mu_
  // The cancel flag of every queued or running job, by id; guarded by mu_.
  std::map<int64_t, std::shared_ptr<std::atomic<bool>>> cancel_flags_;
  std::map<int64_t, std::string> cancel_reasons_;  // cancel(id)'s jobs; guarded by mu_
  std::mutex load_mu_;                 // one suite read at a time: its files are capped, not their number
  std::vector<std::thread> workers_;   // up to max_running, started by start()s; guarded by mu_
};

}  // namespace loragate::eval
