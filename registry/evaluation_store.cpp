#include "registry/evaluation_store.h"

#include "registry/registry_connection.h"
#include "registry/sql_connection.h"

namespace loragate {
namespace {

constexpr const char* kColumns =
    "id, started_at, finished_at, online_base, online_sha256, candidate_base, candidate_sha256, adapters, "
    "suite_sha256, gates_sha256, verdict";

EvaluationRecord read_row(const Statement& q, bool with_report) {
  EvaluationRecord r;
  r.id = q.column_int64(0);
  r.started_at = q.column_int64(1);
  r.finished_at = q.column_int64(2);
  r.online_base = q.column_text(3);
  r.online_sha256 = q.column_text(4);
  r.candidate_base = q.column_text(5);
  r.candidate_sha256 = q.column_text(6);
  r.adapters = q.column_text(7);
  r.suite_sha256 = q.column_text(8);
  r.gates_sha256 = q.column_text(9);
  r.verdict = q.column_text(10);
  if (with_report) r.report = q.column_text(11);
  return r;
}

}  // namespace

EvaluationStore::EvaluationStore(std::unique_ptr<SqlConnection> db) : db_(std::move(db)) {}
EvaluationStore::~EvaluationStore() = default;

Result<std::unique_ptr<EvaluationStore>> EvaluationStore::open(const std::string& path) {
  LG_ASSIGN_OR_RETURN(std::unique_ptr<SqlConnection> db, open_registry_connection(path));
  return std::unique_ptr<EvaluationStore>(new EvaluationStore(std::move(db)));
}

Result<int64_t> EvaluationStore::add(const EvaluationRecord& r) {
  if (r.verdict != "pass" && r.verdict != "fail" && r.verdict != "inconclusive" && r.verdict != "cancelled") {
    return Status::invalid_argument("evaluation verdict '" + r.verdict +
                                    "' is not pass, fail, inconclusive or cancelled");
  }
  std::lock_guard<std::mutex> lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  LG_ASSIGN_OR_RETURN(Statement insert,
                      db_->prepare("INSERT INTO evaluations (started_at, finished_at, online_base, online_sha256, "
                                   "candidate_base, candidate_sha256, adapters, suite_sha256, gates_sha256, verdict, "
                                   "report) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) RETURNING id"));
  insert.bind(1, r.started_at)
      .bind(2, r.finished_at)
      .bind(3, r.online_base)
      .bind(4, r.online_sha256)
      .bind(5, r.candidate_base)
      .bind(6, r.candidate_sha256)
      .bind(7, r.adapters)
      .bind(8, r.suite_sha256)
      .bind(9, r.gates_sha256)
      .bind(10, r.verdict)
      .bind(11, r.report);
  LG_ASSIGN_OR_RETURN(const bool row, insert.step());
  if (!row) return Status::internal("database '" + db_->path() + "': INSERT ... RETURNING id returned no row");
  const int64_t id = insert.column_int64(0);
  insert.reset();  // done with the INSERT before the transaction ends
  LG_RETURN_IF_ERROR(txn.commit());
  return id;
}

Result<EvaluationRecord> EvaluationStore::get(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q,
                      db_->prepare(std::string("SELECT ") + kColumns + ", report FROM evaluations WHERE id = ?1"));
  q.bind(1, id);
  LG_ASSIGN_OR_RETURN(const bool found, q.step());
  if (!found) return Status::not_found("evaluation run " + std::to_string(id) + " not found (see loragate eval ls)");
  return read_row(q, /*with_report=*/true);
}

Result<std::vector<EvaluationRecord>> EvaluationStore::list(int64_t limit) {
  if (limit < 1) return Status::invalid_argument("limit must be >= 1");
  std::lock_guard<std::mutex> lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q,
                      db_->prepare(std::string("SELECT ") + kColumns + " FROM evaluations ORDER BY id DESC LIMIT ?1"));
  q.bind(1, limit);
  std::vector<EvaluationRecord> out;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) return out;
    out.push_back(read_row(q, /*with_report=*/false));
  }
}

Result<std::vector<EvaluationRecord>> EvaluationStore::runs_of_candidate(const std::string& candidate_sha256,
                                                                         const std::string& candidate_base,
                                                                         int64_t limit) {
  if (limit < 1) return Status::invalid_argument("limit must be >= 1");
  std::lock_guard<std::mutex> lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare(std::string("SELECT ") + kColumns +
                                                " FROM evaluations WHERE candidate_sha256 = ?1 OR candidate_base = ?2"
                                                " ORDER BY id DESC LIMIT ?3"));
  q.bind(1, candidate_sha256).bind(2, candidate_base).bind(3, limit);
  std::vector<EvaluationRecord> out;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) return out;
    out.push_back(read_row(q, /*with_report=*/false));
  }
}

Result<std::optional<EvaluationRecord>> EvaluationStore::latest_pass_measuring(const std::string& base_sha256,
                                                                                const std::string& suite_sha256) {
  if (base_sha256.empty() || suite_sha256.empty()) return std::optional<EvaluationRecord>();
  std::lock_guard<std::mutex> lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare(std::string("SELECT ") + kColumns +
                                                ", report FROM evaluations WHERE verdict = 'pass'"
                                                " AND suite_sha256 = ?2 AND (candidate_sha256 = ?1 OR online_sha256 = ?1)"
                                                " ORDER BY id DESC LIMIT 1"));
  q.bind(1, base_sha256).bind(2, suite_sha256);
  LG_ASSIGN_OR_RETURN(const bool found, q.step());
  if (!found) return std::optional<EvaluationRecord>();
  return std::optional<EvaluationRecord>(read_row(q, /*with_report=*/true));
}

}  // namespace loragate
