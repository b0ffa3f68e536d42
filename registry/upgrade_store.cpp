#include "registry/upgrade_store.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "registry/registry_connection.h"
#include "registry/sql_connection.h"

namespace loragate {
namespace {

constexpr const char* kUpgradeColumns =
    "id, started_at, updated_at, candidate, candidate_path, online_base, promote, skip_untrained, state, steps, "
    "verdict, evaluation, report, error";

int64_t upgrade_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

UpgradeRecord read_upgrade(const Statement& q) {
  UpgradeRecord r;
  r.id = q.column_int64(0);
  r.started_at = q.column_int64(1);
  r.updated_at = q.column_int64(2);
  r.candidate = q.column_text(3);
  r.candidate_path = q.column_text(4);
  r.online_base = q.column_text(5);
  r.promote = q.column_int64(6) != 0;
  r.skip_untrained = q.column_int64(7) != 0;
  r.state = q.column_text(8);
  r.steps = q.column_text(9);
  r.verdict = q.column_text(10);
  r.evaluation = q.column_int64(11);
  r.report = q.column_text(12);
  r.error = q.column_text(13);
  return r;
}

Status check_upgrade(const UpgradeRecord& r) {
  const std::string who = "upgrade of candidate '" + r.candidate + "'";
  if (r.candidate.empty()) return Status::invalid_argument("an upgrade needs a candidate base name");
  if (!upgrade_state_is_known(r.state)) return Status::invalid_argument(who + ": unknown state '" + r.state + "'");
  // An object (strategy, stages, steps) since upgrades have stages; a bare array before.
  const nlohmann::json steps = nlohmann::json::parse(r.steps, nullptr, /*allow_exceptions=*/false);
  if (!steps.is_object() && !steps.is_array()) {
    return Status::invalid_argument(who + ": steps are not a JSON object or array");
  }
  return Status::ok();
}

}  // namespace

bool upgrade_state_is_running(const std::string& state) {
  return state == "queued" || state == "judging_base" || state == "transferring" || state == "training" ||
         state == "evaluating" || state == "promoting";
}

bool upgrade_state_is_known(const std::string& state) {
  return upgrade_state_is_running(state) || state == "passed" || state == "failed" || state == "promoted" ||
         state == "cancelled" || state == "interrupted";
}

UpgradeStore::UpgradeStore(std::unique_ptr<SqlConnection> db) : db_(std::move(db)) {}
UpgradeStore::~UpgradeStore() = default;

Result<std::unique_ptr<UpgradeStore>> UpgradeStore::open(const std::string& path) {
  LG_ASSIGN_OR_RETURN(std::unique_ptr<SqlConnection> db, open_registry_connection(path));
  return std::unique_ptr<UpgradeStore>(new UpgradeStore(std::move(db)));
}

Result<int64_t> UpgradeStore::add(const UpgradeRecord& r) {
  LG_RETURN_IF_ERROR(check_upgrade(r));
  std::lock_guard<std::mutex> lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  LG_ASSIGN_OR_RETURN(Statement insert,
                      db_->prepare("INSERT INTO upgrades (started_at, updated_at, candidate, candidate_path, "
                                   "online_base, promote, skip_untrained, state, steps, verdict, evaluation, report, "
                                   "error) VALUES (?1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) RETURNING id"));
  insert.bind(1, upgrade_now())
      .bind(2, r.candidate)
      .bind(3, r.candidate_path)
      .bind(4, r.online_base)
      .bind(5, r.promote ? 1 : 0)
      .bind(6, r.skip_untrained ? 1 : 0)
      .bind(7, r.state)
      .bind(8, r.steps)
      .bind(9, r.verdict)
      .bind(10, r.evaluation)
      .bind(11, r.report)
      .bind(12, r.error);
  LG_ASSIGN_OR_RETURN(const bool row, insert.step());
  if (!row) return Status::internal("database '" + db_->path() + "': INSERT ... RETURNING id returned no row");
  const int64_t id = insert.column_int64(0);
  insert.reset();  // done with the INSERT before the transaction ends
  LG_RETURN_IF_ERROR(txn.commit());
  return id;
}

Status UpgradeStore::update(const UpgradeRecord& r) {
  LG_RETURN_IF_ERROR(check_upgrade(r));
  std::lock_guard<std::mutex> lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  LG_ASSIGN_OR_RETURN(Statement q,
                      db_->prepare("UPDATE upgrades SET updated_at = ?2, candidate = ?3, candidate_path = ?4, "
                                   "online_base = ?5, promote = ?6, skip_untrained = ?7, state = ?8, steps = ?9, "
                                   "verdict = ?10, evaluation = ?11, report = ?12, error = ?13 WHERE id = ?1"));
  q.bind(1, r.id)
      .bind(2, upgrade_now())
      .bind(3, r.candidate)
      .bind(4, r.candidate_path)
      .bind(5, r.online_base)
      .bind(6, r.promote ? 1 : 0)
      .bind(7, r.skip_untrained ? 1 : 0)
      .bind(8, r.state)
      .bind(9, r.steps)
      .bind(10, r.verdict)
      .bind(11, r.evaluation)
      .bind(12, r.report)
      .bind(13, r.error);
  LG_RETURN_IF_ERROR(q.run());
  if (db_->changes() == 0) return Status::not_found("upgrade " + std::to_string(r.id) + " not found");
  return txn.commit();
}

Result<UpgradeRecord> UpgradeStore::get(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q,
                      db_->prepare(std::string("SELECT ") + kUpgradeColumns + " FROM upgrades WHERE id = ?1"));
  q.bind(1, id);
  LG_ASSIGN_OR_RETURN(const bool found, q.step());
  if (!found) return Status::not_found("upgrade " + std::to_string(id) + " not found (GET /admin/upgrades lists them)");
  return read_upgrade(q);
}

Result<std::vector<UpgradeRecord>> UpgradeStore::list(int64_t limit) {
  if (limit < 1) return Status::invalid_argument("limit must be >= 1");
  std::lock_guard<std::mutex> lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare(std::string("SELECT ") + kUpgradeColumns +
                                                " FROM upgrades ORDER BY id DESC LIMIT ?1"));
  q.bind(1, limit);
  std::vector<UpgradeRecord> out;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) return out;
    out.push_back(read_upgrade(q));
  }
}

Result<int64_t> UpgradeStore::mark_interrupted() {
  std::lock_guard<std::mutex> lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  LG_ASSIGN_OR_RETURN(Statement q,
                      db_->prepare("UPDATE upgrades SET state = 'interrupted', updated_at = ?1, error = "
                                   "'the server stopped while it ran; ask for the same candidate again to resume'"
                                   " WHERE state IN ('queued', 'training', 'evaluating', 'promoting')"));
  q.bind(1, upgrade_now());
  LG_RETURN_IF_ERROR(q.run());
  const int64_t changed = db_->changes();
  LG_RETURN_IF_ERROR(txn.commit());
  return changed;
}

}  // namespace loragate
