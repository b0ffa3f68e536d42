// SqlRegistry: the fleet's rows — replicas (heartbeats, desired bases),
// rollouts — and wait_for_change: on PostgreSQL the listener's
// notifications (pg_listener.h); on SQLite a poll of data_version (bumped by
// other connections' commits) and this registry's own change count.
#include <chrono>
#include <mutex>
#include <thread>

#include "registry/registry.h"
#include "registry/pg_listener.h"
#include "registry/sql_connection.h"
#include "registry/sqlite_db.h"
#include "registry/sql_registry.h"

namespace loragate::registry_detail {
namespace {

int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// How often wait_for_change looks: SQLite has no notifications across processes.
constexpr int64_t kChangePollMs = 100;

}  // namespace

ReplicaRecord SqlRegistry::read_replica(const Statement& row) {
  ReplicaRecord r;
  r.url = row.column_text(0);
  r.serving = row.column_text(1);
  r.bases = row.column_text(2);
  r.adapters = row.column_text(3);
  r.desired_base = row.column_text(4);
  r.started_at = row.column_int64(5);
  r.last_seen = row.column_int64(6);
  return r;
}

RolloutRecord SqlRegistry::read_rollout(const Statement& row) {
  RolloutRecord r;
  r.id = row.column_int64(0);
  r.started_at = row.column_int64(1);
  r.updated_at = row.column_int64(2);
  r.kind = row.column_text(3);
  r.from_base = row.column_text(4);
  r.to_base = row.column_text(5);
  r.coordinator = row.column_text(6);
  r.state = row.column_text(7);
  r.steps = row.column_text(8);
  r.error = row.column_text(9);
  return r;
}

Result<ReplicaRecord> SqlRegistry::find_replica(const std::string& url) {
  LG_ASSIGN_OR_RETURN(Statement q,
                      db_->prepare(std::string("SELECT ") + kReplicaColumns + " FROM replicas WHERE url = ?1"));
  q.bind(1, url);
  LG_ASSIGN_OR_RETURN(const bool found, q.step());
  if (!found) return Status::not_found("replica " + in_quotes(url) + " is not in the fleet");
  return read_replica(q);
}

Result<RolloutRecord> SqlRegistry::find_rollout(int64_t id) {
  LG_ASSIGN_OR_RETURN(Statement q,
                      db_->prepare(std::string("SELECT ") + kRolloutColumns + " FROM rollouts WHERE id = ?1"));
  q.bind(1, id);
  LG_ASSIGN_OR_RETURN(const bool found, q.step());
  if (!found) return Status::not_found("rollout " + std::to_string(id) + " not found");
  return read_rollout(q);
}

Result<ReplicaRecord> SqlRegistry::upsert_replica(const ReplicaRecord& record) {
  LG_RETURN_IF_ERROR(validate(record));
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement upsert,
                      db_->prepare("INSERT INTO replicas (url, serving, bases, adapters, desired_base, started_at,"
                                   " last_seen) VALUES (?1, ?2, ?3, ?4, '', ?5, ?6)"
                                   " ON CONFLICT (url) DO UPDATE SET serving = excluded.serving,"
                                   " bases = excluded.bases, adapters = excluded.adapters,"
                                   " started_at = excluded.started_at, last_seen = excluded.last_seen"));
  upsert.bind(1, record.url).bind(2, record.serving).bind(3, record.bases).bind(4, record.adapters);
  upsert.bind(5, record.started_at).bind(6, unix_now_ms());
  LG_RETURN_IF_ERROR(upsert.run());  // no notify_change: heartbeats change nothing a replica serves
  return find_replica(record.url);
}

Result<std::vector<ReplicaRecord>> SqlRegistry::list_replicas() {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q,
                      db_->prepare(std::string("SELECT ") + kReplicaColumns + " FROM replicas ORDER BY url"));
  std::vector<ReplicaRecord> out;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) return out;
    out.push_back(read_replica(q));
  }
}

Status SqlRegistry::set_replica_desired_base(const std::string& url, const std::string& base) {
  if (!base.empty()) LG_RETURN_IF_ERROR(validate_name("base model name", base, /*allow_slash=*/true));
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  LG_ASSIGN_OR_RETURN(Statement update, db_->prepare("UPDATE replicas SET desired_base = ?2 WHERE url = ?1"));
  update.bind(1, url).bind(2, base);
  LG_RETURN_IF_ERROR(update.run());
  if (db_->changes() == 0) return Status::not_found("replica " + in_quotes(url) + " is not in the fleet");
  return commit_change(txn);
}

Status SqlRegistry::remove_replica(const std::string& url) {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  LG_ASSIGN_OR_RETURN(Statement del, db_->prepare("DELETE FROM replicas WHERE url = ?1"));
  del.bind(1, url);
  LG_RETURN_IF_ERROR(del.run());
  if (db_->changes() == 0) return Status::not_found("replica " + in_quotes(url) + " is not in the fleet");
  return commit_change(txn);
}

Result<RolloutRecord> SqlRegistry::add_rollout(const RolloutRecord& record) {
  LG_RETURN_IF_ERROR(validate(record));
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  LG_ASSIGN_OR_RETURN(Statement insert,
                      db_->prepare("INSERT INTO rollouts (started_at, updated_at, kind, from_base, to_base,"
                                   " coordinator, state, steps, error) VALUES (?1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
                                   " RETURNING id"));
  insert.bind(1, unix_now()).bind(2, record.kind).bind(3, record.from_base).bind(4, record.to_base);
  insert.bind(5, record.coordinator).bind(6, record.state).bind(7, record.steps).bind(8, record.error);
  LG_ASSIGN_OR_RETURN(const bool row, insert.step());
  if (!row) return Status::internal("INSERT INTO rollouts returned no id");
  const int64_t id = insert.column_int64(0);
  insert.reset();  // done with the INSERT before reading the row back
  LG_ASSIGN_OR_RETURN(RolloutRecord stored, find_rollout(id));
  LG_RETURN_IF_ERROR(commit_change(txn));
  return stored;
}

Status SqlRegistry::update_rollout(const RolloutRecord& record) {
  LG_RETURN_IF_ERROR(validate(record));
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  LG_ASSIGN_OR_RETURN(Statement update,
                      db_->prepare("UPDATE rollouts SET updated_at = ?2, kind = ?3, from_base = ?4, to_base = ?5,"
                                   " coordinator = ?6, state = ?7, steps = ?8, error = ?9 WHERE id = ?1"));
  update.bind(1, record.id).bind(2, unix_now()).bind(3, record.kind).bind(4, record.from_base);
  update.bind(5, record.to_base).bind(6, record.coordinator).bind(7, record.state).bind(8, record.steps);
  update.bind(9, record.error);
  LG_RETURN_IF_ERROR(update.run());
  if (db_->changes() == 0) return Status::not_found("rollout " + std::to_string(record.id) + " not found");
  return commit_change(txn);
}

Result<RolloutRecord> SqlRegistry::get_rollout(int64_t id) {
  std::lock_guard lock(mu_);
  return find_rollout(id);
}

Result<std::vector<RolloutRecord>> SqlRegistry::list_rollouts(int64_t limit) {
  if (limit < 1) return Status::invalid_argument("rollout list limit " + std::to_string(limit) + " is not >= 1");
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare(std::string("SELECT ") + kRolloutColumns +
                                                " FROM rollouts ORDER BY id DESC LIMIT ?1"));
  q.bind(1, limit);
  std::vector<RolloutRecord> out;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) return out;
    out.push_back(read_rollout(q));
  }
}

Result<bool> SqlRegistry::wait_for_change(int64_t timeout_ms) {
  if (listener_ != nullptr) return listener_->wait(timeout_ms);
  auto* sqlite = dynamic_cast<SqliteDb*>(db_.get());
  if (sqlite == nullptr) return Status::internal("wait_for_change: a registry with neither a listener nor SQLite");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    {
      std::lock_guard lock(mu_);
      LG_ASSIGN_OR_RETURN(const int64_t version, sqlite->query_int64("PRAGMA data_version"));
      const bool first = seen_data_version_ < 0;
      const bool changed = !first && (version != seen_data_version_ || own_changes_ != seen_own_changes_);
      seen_data_version_ = version;
      seen_own_changes_ = own_changes_;
      if (changed) return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(kChangePollMs));
  }
}

}  // namespace loragate::registry_detail
