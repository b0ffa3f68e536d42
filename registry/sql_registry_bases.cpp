// SqlRegistry: base models (upsert, get, list, state) and the swap log.
#include <chrono>
#include <mutex>
#include <utility>

#include <nlohmann/json.hpp>

#include "registry/registry.h"
#include "registry/schema.h"
#include "registry/sql_connection.h"
#include "registry/sql_registry.h"

namespace loragate::registry_detail {

Result<BaseModelRecord> SqlRegistry::find_base_model(const std::string& name) {
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare(std::string("SELECT ") + kBaseModelColumns +
                                                " FROM base_models WHERE name = ?1"));
  q.bind(1, name);
  LG_ASSIGN_OR_RETURN(const bool found, q.step());
  if (!found) return Status::not_found("base model " + in_quotes(name) + " is not registered");
  return read_base_model(q);
}

Result<BaseModelRecord> SqlRegistry::upsert_base_model(const BaseModelRecord& record) {
  LG_RETURN_IF_ERROR(validate(record));
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  const int64_t now = unix_now();
  LG_ASSIGN_OR_RETURN(
      Statement upsert,
      db_->prepare("INSERT INTO base_models (name, path, state, dtype, sha256, error, created_at, updated_at)"
                   " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)"
                   " ON CONFLICT (name) DO UPDATE SET"
                   " path = excluded.path, state = excluded.state, dtype = excluded.dtype,"
                   " sha256 = excluded.sha256, error = excluded.error, updated_at = excluded.updated_at"));
  upsert.bind(1, record.name)
      .bind(2, record.path)
      .bind(3, base_model_state_name(record.state))
      .bind(4, record.dtype)
      .bind(5, record.sha256)
      .bind(6, record.state == BaseModelState::kFailed ? record.error : std::string())
      .bind(7, now);
  LG_RETURN_IF_ERROR(upsert.run());
  LG_ASSIGN_OR_RETURN(BaseModelRecord stored, find_base_model(record.name));
  LG_RETURN_IF_ERROR(commit_change(txn));
  return stored;
}

Result<BaseModelRecord> SqlRegistry::get_base_model(const std::string& name) {
  std::lock_guard lock(mu_);
  return find_base_model(name);
}

Result<std::vector<BaseModelRecord>> SqlRegistry::list_base_models() {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q,
                      db_->prepare(std::string("SELECT ") + kBaseModelColumns + " FROM base_models ORDER BY name"));
  std::vector<BaseModelRecord> out;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) return out;
    LG_ASSIGN_OR_RETURN(BaseModelRecord r, read_base_model(q));
    out.push_back(std::move(r));
  }
}

Status SqlRegistry::set_base_state(const std::string& name, BaseModelState state, const std::string& error) {
  if (state == BaseModelState::kServing) {
    return Status::invalid_argument("cannot set base model " + in_quotes(name) +
                                    " to serving directly: a base starts serving only through a swap "
                                    "(record_swap), which also moves the base serving now to previous");
  }
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  LG_ASSIGN_OR_RETURN(Statement update,
                      db_->prepare("UPDATE base_models SET state = ?2, error = ?3, updated_at = ?4 WHERE name = ?1"));
  update.bind(1, name)
      .bind(2, base_model_state_name(state))
      .bind(3, state == BaseModelState::kFailed ? error : std::string())
      .bind(4, unix_now());
  LG_RETURN_IF_ERROR(update.run());
  if (db_->changes() == 0) return Status::not_found("base model " + in_quotes(name) + " is not registered");
  return commit_change(txn);
}

Result<SwapRecord> SqlRegistry::record_swap(const SwapRecord& swap) {
  LG_RETURN_IF_ERROR(validate(swap));
  const std::string doing = "cannot swap to base model " + in_quotes(swap.to_base);
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  auto target = find_base_model(swap.to_base);
  if (!target) return target.status().with_context(doing);
  switch (target->state) {
    case BaseModelState::kLoading:
    case BaseModelState::kFailed:
    case BaseModelState::kRetired:
      return Status::invalid_argument(doing + ": it is " + base_model_state_name(target->state) +
                                      " (only a candidate, previous or serving base can start serving)");
    case BaseModelState::kCandidate:
    case BaseModelState::kPrevious:
    case BaseModelState::kServing:
      break;
  }
  const int64_t now = unix_now();
  // Order matters: the previous base steps back before the serving one
  // takes its place, so exactly one base is previous afterwards.
  LG_ASSIGN_OR_RETURN(Statement demote, db_->prepare("UPDATE base_models SET state = ?3, updated_at = ?4"
                                                     " WHERE state = ?2 AND name != ?1"));
  demote.bind(1, swap.to_base)
      .bind(2, base_model_state_name(BaseModelState::kPrevious))
      .bind(3, base_model_state_name(BaseModelState::kCandidate))
      .bind(4, now);
  LG_RETURN_IF_ERROR(demote.run());
  demote.reset();
  demote.bind(1, swap.to_base)
      .bind(2, base_model_state_name(BaseModelState::kServing))
      .bind(3, base_model_state_name(BaseModelState::kPrevious))
      .bind(4, now);
  LG_RETURN_IF_ERROR(demote.run());
  if (target->state != BaseModelState::kServing) {
    LG_ASSIGN_OR_RETURN(Statement promote, db_->prepare("UPDATE base_models SET state = ?2, error = '',"
                                                        " updated_at = ?3 WHERE name = ?1"));
    promote.bind(1, swap.to_base).bind(2, base_model_state_name(BaseModelState::kServing)).bind(3, now);
    LG_RETURN_IF_ERROR(promote.run());
  }
  LG_ASSIGN_OR_RETURN(Statement insert,
                      db_->prepare(std::string("INSERT INTO base_swaps (at, actor, from_base, to_base, kind, forced, note)"
                                               " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING ") +
                                   kSwapColumns));
  insert.bind(1, now)
      .bind(2, swap.actor)
      .bind(3, swap.from_base)
      .bind(4, swap.to_base)
      .bind(5, swap.kind)
      .bind(6, int64_t{swap.forced ? 1 : 0})
      .bind(7, swap.note);
  LG_ASSIGN_OR_RETURN(const bool found, insert.step());
  if (!found) return Status::internal(doing + ": INSERT INTO base_swaps returned no row");
  LG_ASSIGN_OR_RETURN(SwapRecord stored, read_swap(insert));
  insert.reset();  // done with the INSERT before the transaction ends
  LG_RETURN_IF_ERROR(commit_change(txn));
  return stored;
}

Result<std::vector<SwapRecord>> SqlRegistry::list_swaps(int64_t limit) {
  if (limit < 1) return Status::invalid_argument("list_swaps: limit " + std::to_string(limit) + " is not >= 1");
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare(std::string("SELECT ") + kSwapColumns +
                                                " FROM base_swaps ORDER BY id DESC LIMIT ?1"));
  q.bind(1, limit);
  std::vector<SwapRecord> out;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) return out;
    LG_ASSIGN_OR_RETURN(SwapRecord r, read_swap(q));
    out.push_back(std::move(r));
  }
}

}  // namespace loragate::registry_detail
