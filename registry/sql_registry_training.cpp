// SqlRegistry: the scenarios' training sets (set, get, list). One row per
// scenario name in scenario_training (schema.h migration 5); removing the
// last scenario of a name removes its row (sql_registry_scenarios.cpp).
#include <mutex>

#include "registry/registry.h"
#include "registry/sql_connection.h"
#include "registry/sql_registry.h"

namespace loragate::registry_detail {

TrainingSetRecord SqlRegistry::read_training_set(const Statement& row) {
  TrainingSetRecord r;
  r.scenario = row.column_text(0);
  r.path = row.column_text(1);
  r.sha256 = row.column_text(2);
  r.config = row.column_text(3);
  r.created_at = row.column_int64(4);
  r.updated_at = row.column_int64(5);
  return r;
}

Result<TrainingSetRecord> SqlRegistry::find_training_set(const std::string& scenario) {
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare(std::string("SELECT ") + kTrainingSetColumns +
                                                " FROM scenario_training WHERE scenario = ?1"));
  q.bind(1, scenario);
  LG_ASSIGN_OR_RETURN(const bool found, q.step());
  if (!found) {
    return Status::not_found("scenario " + in_quotes(scenario) +
                             " has no training set (loragate scenario set NAME ADAPTER --train FILE)");
  }
  return read_training_set(q);
}

Result<TrainingSetRecord> SqlRegistry::set_training_set(const TrainingSetRecord& record) {
  LG_RETURN_IF_ERROR(validate(record));
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  LG_ASSIGN_OR_RETURN(Statement exists, db_->prepare("SELECT count(*) FROM scenarios WHERE name = ?1"));
  exists.bind(1, record.scenario);
  LG_ASSIGN_OR_RETURN(const bool row, exists.step());
  if (!row || exists.column_int64(0) == 0) {
    return Status::not_found("cannot record a training set for scenario " + in_quotes(record.scenario) +
                             ": no base has a scenario of that name (set the scenario first)");
  }
  LG_ASSIGN_OR_RETURN(Statement upsert,
                      db_->prepare("INSERT INTO scenario_training (scenario, path, sha256, config, created_at,"
                                   " updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)"
                                   " ON CONFLICT (scenario) DO UPDATE SET path = excluded.path,"
                                   " sha256 = excluded.sha256, config = excluded.config,"
                                   " updated_at = excluded.updated_at"));
  upsert.bind(1, record.scenario).bind(2, record.path).bind(3, record.sha256).bind(4, record.config).bind(5, unix_now());
  LG_RETURN_IF_ERROR(upsert.run());
  LG_ASSIGN_OR_RETURN(TrainingSetRecord stored, find_training_set(record.scenario));
  LG_RETURN_IF_ERROR(commit_change(txn));
  return stored;
}

Result<TrainingSetRecord> SqlRegistry::get_training_set(const std::string& scenario) {
  std::lock_guard lock(mu_);
  return find_training_set(scenario);
}

Result<std::vector<TrainingSetRecord>> SqlRegistry::list_training_sets() {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare(std::string("SELECT ") + kTrainingSetColumns +
                                                " FROM scenario_training ORDER BY scenario"));
  std::vector<TrainingSetRecord> out;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) return out;
    out.push_back(read_training_set(q));
  }
}

}  // namespace loragate::registry_detail
