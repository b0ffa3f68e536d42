// UpgradeJobs: a base upgrade as one request inside a running server, in
// stages, cheapest first (each recorded with its state and wall time):
//  1. base: the candidate is judged on its own, by the gates that need no
//     adapter (generic set, scenarios without adapter; EvaluationScope
//     kBaseOnly). A base that fails them is rejected here, before any training.
//  2. transfer (strategy transfer-first): each scenario's online adapter is
//     registered on the candidate as it is and the suite runs; a scenario
//     whose own gates pass keeps it ("transferred"). The two bases' per-module
//     similarity is measured beside it (base_similarity.h).
//  3. retrain: the scenarios left (every one under retrain-all) have their
//     adapter retrained on the candidate from the scenario's recorded training
//     set and config (retrain.h), warm-started from the online adapter under
//     transfer-first, and registered under the scenario's adapter name.
//  4. evaluate: the whole suite with the adapters each scenario ended with
//     (the transfer's run itself when nothing was retrained).
//  5. promote: when it passed and promote was asked, through BaseSet::promote
//     (which asks the promotion check first).
// One upgrade at a time, on a worker thread at the lowest OS priority (nice
// 19): live traffic keeps its cores, as the evaluation worker does. A
// scenario without a training set blocks the upgrade before anything runs,
// unless skip_untrained (then it is listed as skipped: the candidate keeps
// whatever adapter it has for it).
//
// Every step is written to the UpgradeStore (registry/upgrade_store.h), so a
// restart finds the upgrade that was running and shows it interrupted; asking
// for the same candidate again resumes it: finished retrainings are found in
// their content-addressed folders, a cut one resumes from its checkpoint, and
// registered steps are kept. cancel() stops the training at its next step
// (leaving a checkpoint) or the evaluation at its next request.
//
// Thread-safety: every public method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bases/base_set.h"
#include "common/weight_type.h"
#include "registry/evaluation_store.h"
#include "registry/registry.h"
#include "registry/upgrade_store.h"
#include "upgrade/evaluation_jobs.h"
#include "upgrade/upgrade_status.h"

namespace loragate::eval {

// How a server runs upgrades.
struct UpgradeOptions {
  std::string trained_dir;                  // retrained adapters go to <trained_dir>/<candidate>/<scenario>-<hash>
  std::string suite_path, gates_path;       // the server's evaluation.suite and .gates ("" gates: the defaults)
  std::vector<std::string> eval_roots;      // handed to EvaluationJobs::start
  std::vector<std::string> training_roots;  // the training sets must still lie inside one (empty: anywhere)
  std::chrono::milliseconds poll{100};      // how often the evaluation's progress is read
};

// What an upgrade needs of the server beyond the bases and the registry: the
// admin API's adapter registration (validating by loading), and the routes
// kept in memory.
struct UpgradeHooks {
  // Registers adapter `name` from the server's own folder `dir` on base `base`.
  std::function<Result<AdapterRecord>(const std::string& name, const std::string& dir, const std::string& base)>
      register_adapter;
  std::function<Status(const std::string& name, const std::string& base)> unregister_adapter;
  std::function<void()> routes_changed;  // after the registry's routes changed
  // Promotes the candidate (a fleet replica rolls it across the fleet);
  // null = BaseSet::promote here.
  std::function<Status(const std::string& candidate, const std::string& actor)> promote;
};

struct UpgradeRequest {
  std::string candidate;              // the candidate base's name
  std::string path;                   // its model directory (resolved by the caller inside the base roots)
  WeightType dtype = WeightType::kF32;  // when it has to be loaded
  bool promote = false;
  bool skip_untrained = false;
  UpgradeStrategy strategy = UpgradeStrategy::kTransferFirst;
  std::string suite_path, gates_path; // "" = UpgradeOptions'
  std::string actor = "admin";        // who asked, for the swap history
};


class UpgradeJobs {
 public:
  // None owned; all outlive the jobs. Marks upgrades left running by an
  // earlier process as interrupted.
  UpgradeJobs(BaseSet* bases, Registry* registry, EvaluationJobs* evaluations, EvaluationStore* runs,
              UpgradeStore* store, UpgradeHooks hooks, UpgradeOptions options);
  ~UpgradeJobs();  // cancels the running upgrade (it stays resumable), joins its worker
  UpgradeJobs(const UpgradeJobs&) = delete;
  UpgradeJobs& operator=(const UpgradeJobs&) = delete;

  // Checks what can be checked now — none running (failed_precondition),
  // the candidate is not the serving base and, when loaded, is loaded from
  // `path`; a suite; every scenario has a training set unless skip_untrained
  // (failed_precondition listing those without) — then starts (loading the
  // candidate first when it is not loaded) and returns the queued upgrade.
  // An interrupted or cancelled upgrade of the same candidate resumes under
  // its id.
  Result<UpgradeStatus> start(const UpgradeRequest& request);
  Result<UpgradeStatus> get(int64_t id) const;
  // The most recent first.
  Result<std::vector<UpgradeStatus>> list() const;
  // Cancels upgrade `id` if it runs (it ends "cancelled", resumable); ok when
  // it had ended; not_found when unknown.
  Status cancel(int64_t id);
  // Shutdown: the running upgrade stops and is recorded interrupted; later start()s are refused.
  void cancel_all();

 private:
  struct Plan;
  Result<Plan> plan(const UpgradeRequest& request, const ServingBase& serving) const;
  void run(Plan plan);
  // The stages of the run: each returns false when the upgrade ended (its state recorded).
  bool load_candidate(Plan& plan);
  bool judge_base(Plan& plan);
  bool transfer(Plan& plan);
  bool retrain(Plan& plan);
  bool evaluate(Plan& plan);
  void promote(Plan& plan);
  // Marks stage `name` running (begin) or ended in `state` with its wall time (end).
  void begin_stage(Plan& plan, const std::string& name);
  void end_stage(Plan& plan, const std::string& name, const std::string& state, const std::string& note = "");
  // Runs the server's suite on the candidate as `scope` and waits for it, showing
  // its progress; the finished job, or nullopt when the upgrade ended (recorded).
  std::optional<JobStatus> run_evaluation(Plan& plan, EvaluationScope scope);
  // Registers `dir` on the candidate as the step's adapter and routes its scenario to it.
  Status register_step(Plan& plan, UpgradeStep& step, const std::string& dir);
  // Ends the upgrade in `state` with `error` (cancelled / interrupted when a cancel was asked).
  void finish(Plan& plan, const std::string& state, const std::string& error);
  // Publishes `plan`'s status and writes it to the store (at most once a second unless `force`).
  void publish(Plan& plan, bool force = true);
  // Writes the stored evaluation run's report beside the adapters; its path, and the failing gates.
  Result<std::string> write_report(const Plan& plan, int64_t run_id, std::vector<std::string>* failing) const;
  // The stored run `run_id`'s verdict on each scenario's adapter gates (not the base-quality ones).
  Result<std::map<std::string, Verdict>> scenario_verdicts(int64_t run_id) const;
  bool cancelled() const { return cancel_.load(); }

  BaseSet* bases_;
  Registry* registry_;
  EvaluationJobs* evaluations_;
  EvaluationStore* runs_;
  UpgradeStore* store_;
  const UpgradeHooks hooks_;
  const UpgradeOptions options_;

  std::mutex start_mu_;                     // one start() at a time: the check and the launch are one step
  mutable std::mutex mu_;
  std::unique_ptr<UpgradeStatus> running_;  // the running upgrade's status; guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
  std::thread worker_;                      // the last upgrade's; joined by the next start() and ~UpgradeJobs
  std::atomic<bool> cancel_{false};         // read by the running upgrade
  std::atomic<bool> shutting_down_{false};  // the cancel came from cancel_all
};


}  // namespace loragate::eval
