// SqlRegistry: scenarios (set, remove, list, resolve to an adapter).
#include <chrono>
#include <mutex>
#include <utility>

#include <nlohmann/json.hpp>

#include "registry/registry.h"
#include "registry/schema.h"
#include "registry/sql_connection.h"
#include "registry/sql_registry.h"

namespace loragate::registry_detail {

Result<ScenarioRecord> SqlRegistry::set_scenario(const std::string& name, const std::string& base_model,
                                                    const std::string& adapter) {
  LG_RETURN_IF_ERROR(validate_name("scenario name", name, /*allow_slash=*/false));
  LG_RETURN_IF_ERROR(validate_name("base model name", base_model, /*allow_slash=*/true));
  LG_RETURN_IF_ERROR(validate_name("adapter name", adapter, /*allow_slash=*/false));
  const std::string doing = "cannot point scenario " + in_quotes(name) + " on base model " + in_quotes(base_model) +
                            " at adapter " + in_quotes(adapter);
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  auto target = find_adapter(adapter, base_model);
  if (!target) {
    if (target.status().code() != StatusCode::kNotFound) return target.status().with_context(doing);
    LG_ASSIGN_OR_RETURN(const std::string elsewhere, other_bases_with_adapter(adapter, base_model));
    if (elsewhere.empty()) return target.status().with_context(doing);
    return Status::not_found(doing + ": " + target.status().message() + " (an adapter of that name is on base model " +
                             elsewhere + "; a scenario uses an adapter of its own base)");
  }
  if (target->state != AdapterState::kReady) {
    return Status::invalid_argument(doing + ": the adapter is " + adapter_state_name(target->state) +
                                    ", not ready");
  }
  LG_ASSIGN_OR_RETURN(Statement upsert,
                      db_->prepare("INSERT INTO scenarios (name, base_model, adapter, created_at, updated_at)"
                                   " VALUES (?1, ?2, ?3, ?4, ?4)"
                                   " ON CONFLICT (name, base_model) DO UPDATE SET"
                                   " adapter = excluded.adapter, updated_at = excluded.updated_at"));
  upsert.bind(1, name).bind(2, base_model).bind(3, adapter).bind(4, unix_now());
  LG_RETURN_IF_ERROR(upsert.run());
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare(std::string("SELECT ") + kScenarioColumns +
                                                " FROM scenarios WHERE name = ?1 AND base_model = ?2"));
  q.bind(1, name).bind(2, base_model);
  LG_ASSIGN_OR_RETURN(const bool found, q.step());
  if (!found) return Status::internal("scenario " + in_quotes(name) + " vanished inside its own transaction");
  ScenarioRecord stored = read_scenario(q);
  LG_RETURN_IF_ERROR(commit_change(txn));
  return stored;
}

Status SqlRegistry::remove_scenario(const std::string& name, const std::string& base_model) {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  LG_ASSIGN_OR_RETURN(Statement del, db_->prepare("DELETE FROM scenarios WHERE name = ?1 AND base_model = ?2"));
  del.bind(1, name).bind(2, base_model);
  LG_RETURN_IF_ERROR(del.run());
  if (db_->changes() == 0) {
    return Status::not_found("scenario " + in_quotes(name) + " not found on base model " + in_quotes(base_model));
  }
  // The training set goes with the last scenario of its name.
  LG_ASSIGN_OR_RETURN(Statement orphan,
                      db_->prepare("DELETE FROM scenario_training WHERE scenario = ?1"
                                   " AND NOT EXISTS (SELECT 1 FROM scenarios WHERE name = ?1)"));
  orphan.bind(1, name);
  LG_RETURN_IF_ERROR(orphan.run());
  return commit_change(txn);
}

Result<std::vector<ScenarioRecord>> SqlRegistry::list_scenarios(const std::string& base_model) {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q,
                      db_->prepare(std::string("SELECT ") + kScenarioColumns +
                                   " FROM scenarios WHERE ?1 = '' OR base_model = ?1 ORDER BY base_model, name"));
  q.bind(1, base_model);
  std::vector<ScenarioRecord> out;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) return out;
    out.push_back(read_scenario(q));
  }
}

Result<std::string> SqlRegistry::resolve_scenario(const std::string& name, const std::string& base_model) {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare("SELECT adapter FROM scenarios WHERE name = ?1 AND base_model = ?2"));
  q.bind(1, name).bind(2, base_model);
  LG_ASSIGN_OR_RETURN(const bool found, q.step());
  if (!found) {
    return Status::not_found("scenario " + in_quotes(name) + " not found on base model " + in_quotes(base_model));
  }
  return q.column_text(0);
}

}  // namespace loragate::registry_detail
