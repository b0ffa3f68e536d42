// EvaluationStore: the history of evaluation runs in the registry's database
// (table `evaluations`, schema.h migration 4). A run is stored whole, as
// its report JSON, beside the columns it is found by: the bases' and
// adapters' sha256, the suite and gates hashes, the verdict.
//
// Ownership: open() returns the only owner of its own connection (a second
// connection on the registry: on a SQLite file WAL lets both work). Thread-safety: every
// method may be called from any thread; calls are serialised on a mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace loragate {

class SqlConnection;

struct EvaluationRecord {
  int64_t id = 0;                 // set by add()
  int64_t started_at = 0, finished_at = 0;  // unix seconds
  std::string online_base, online_sha256;
  std::string candidate_base, candidate_sha256;
  std::string adapters;           // JSON {"<arm>/<scenario>": sha256}
  std::string suite_sha256, gates_sha256;
  std::string verdict;            // "pass" | "fail" | "inconclusive" | "cancelled" (stopped before it ended)
  std::string report;             // the report JSON; "" in list() rows
};

class EvaluationStore {
 public:
  // Opens (creating and migrating when needed) the registry at `path`: a
  // SQLite file or a "postgresql://" URL, as Registry::open.
  static Result<std::unique_ptr<EvaluationStore>> open(const std::string& path);
  ~EvaluationStore();
  EvaluationStore(const EvaluationStore&) = delete;
  EvaluationStore& operator=(const EvaluationStore&) = delete;

  // Stores a run; returns its id.
  Result<int64_t> add(const EvaluationRecord& record);
  // The run with `id` (not_found naming it).
  Result<EvaluationRecord> get(int64_t id);
  // The most recent runs first, at most `limit`, without their report.
  Result<std::vector<EvaluationRecord>> list(int64_t limit = 50);
  // The runs whose candidate had sha256 `candidate_sha256` or was named
  // `candidate_base`, newest first, at most `limit`, without their report:
  // what a promotion of that base is judged on (promotion_check.h).
  Result<std::vector<EvaluationRecord>> runs_of_candidate(const std::string& candidate_sha256,
                                                          const std::string& candidate_base, int64_t limit = 200);
  // The latest passing run on suite content `suite_sha256` that measured the
  // base `base_sha256` in either arm (candidate or online), with its report,
  // if there is one: the recorded reference of that base (run_history.h).
  // Empty hashes match nothing.
  Result<std::optional<EvaluationRecord>> latest_pass_measuring(const std::string& base_sha256,
                                                                const std::string& suite_sha256);

 private:
  explicit EvaluationStore(std::unique_ptr<SqlConnection> db);

  std::mutex mu_;
  std::unique_ptr<SqlConnection> db_;  // guarded by mu_
};

}  // namespace loragate
