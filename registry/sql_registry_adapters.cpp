// SqlRegistry: adapters per base (add, get, list, state, remove) and the
// checks that keep scenarios pointing at existing adapters.
#include <chrono>
#include <mutex>
#include <utility>

#include <nlohmann/json.hpp>

#include "registry/registry.h"
#include "registry/schema.h"
#include "registry/sql_connection.h"
#include "registry/sql_registry.h"

namespace loragate::registry_detail {

Result<AdapterRecord> SqlRegistry::find_adapter(const std::string& name, const std::string& base_model) {
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare(std::string("SELECT ") + kAdapterColumns +
                                                " FROM adapters WHERE name = ?1 AND base_model = ?2"));
  q.bind(1, name).bind(2, base_model);
  LG_ASSIGN_OR_RETURN(const bool found, q.step());
  if (!found) {
    return Status::not_found("adapter " + in_quotes(name) + " not found on base model " + in_quotes(base_model));
  }
  return read_adapter(q);
}

Result<std::string> SqlRegistry::other_bases_with_adapter(const std::string& name,
                                                             const std::string& base_model) {
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare("SELECT base_model FROM adapters WHERE name = ?1 AND base_model != ?2"
                                                " ORDER BY base_model"));
  q.bind(1, name).bind(2, base_model);
  std::string bases;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) return bases;
    if (!bases.empty()) bases += ", ";
    bases += in_quotes(q.column_text(0));
  }
}

Status SqlRegistry::check_adapter_unused(const std::string& name, const std::string& base_model,
                                            const std::string& doing) {
  LG_RETURN_IF_ERROR(find_adapter(name, base_model).status());
  LG_ASSIGN_OR_RETURN(Statement q, db_->prepare("SELECT name FROM scenarios WHERE adapter = ?1 AND base_model = ?2"
                                                " ORDER BY name"));
  q.bind(1, name).bind(2, base_model);
  std::string users;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) break;
    if (!users.empty()) users += ", ";
    users += in_quotes(q.column_text(0));
  }
  if (users.empty()) return Status::ok();
  return Status::failed_precondition("cannot " + doing + " adapter " + in_quotes(name) + " on base model " +
                                  in_quotes(base_model) + ": scenario " + users +
                                  " uses it; point the scenario at another adapter or remove it first");
}

Result<AdapterRecord> SqlRegistry::add_adapter(const AdapterRecord& record) {
  LG_RETURN_IF_ERROR(validate(record));
  const std::string doing =
      "cannot add adapter " + in_quotes(record.name) + " to base model " + in_quotes(record.base_model);
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  // Checked here for clear messages; the schema's keys are the backstop.
  auto base = find_base_model(record.base_model);
  if (!base) return base.status().with_context(doing);
  if (base->state == BaseModelState::kRetired || base->state == BaseModelState::kFailed) {
    return Status::invalid_argument(doing + ": the base model is " + base_model_state_name(base->state) +
                                    " and takes no new adapters");
  }
  auto existing = find_adapter(record.name, record.base_model);
  if (existing) {
    return Status::already_exists("adapter " + in_quotes(record.name) + " already exists on base model " +
                                    in_quotes(record.base_model));
  }
  if (existing.status().code() != StatusCode::kNotFound) return existing.status();
  const int64_t now = unix_now();
  LG_ASSIGN_OR_RETURN(Statement insert, db_->prepare(std::string("INSERT INTO adapters (") + kAdapterColumns +
                                                     ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)"));
  insert.bind(1, record.name)
      .bind(2, record.base_model)
      .bind(3, record.path)
      .bind(4, record.rank)
      .bind(5, record.alpha)
      .bind(6, nlohmann::json(record.target_modules).dump())
      .bind(7, record.sha256)
      .bind(8, record.size_bytes)
      .bind(9, adapter_state_name(record.state))
      .bind(10, now);
  LG_RETURN_IF_ERROR(insert.run());
  LG_ASSIGN_OR_RETURN(AdapterRecord stored, find_adapter(record.name, record.base_model));
  LG_RETURN_IF_ERROR(commit_change(txn));
  return stored;
}

Result<AdapterRecord> SqlRegistry::get_adapter(const std::string& name, const std::string& base_model) {
  std::lock_guard lock(mu_);
  return find_adapter(name, base_model);
}

Result<std::vector<AdapterRecord>> SqlRegistry::list_adapters(const std::string& base_model) {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Statement q,
                      db_->prepare(std::string("SELECT ") + kAdapterColumns +
                                   " FROM adapters WHERE ?1 = '' OR base_model = ?1 ORDER BY base_model, name"));
  q.bind(1, base_model);
  std::vector<AdapterRecord> out;
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, q.step());
    if (!row) return out;
    LG_ASSIGN_OR_RETURN(AdapterRecord r, read_adapter(q));
    out.push_back(std::move(r));
  }
}

Status SqlRegistry::set_adapter_state(const std::string& name, const std::string& base_model,
                                         AdapterState state) {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  if (state == AdapterState::kRemoving) {
    LG_RETURN_IF_ERROR(check_adapter_unused(name, base_model, "start removing"));
  }
  LG_ASSIGN_OR_RETURN(Statement update, db_->prepare("UPDATE adapters SET state = ?3, updated_at = ?4"
                                                     " WHERE name = ?1 AND base_model = ?2"));
  update.bind(1, name).bind(2, base_model).bind(3, adapter_state_name(state)).bind(4, unix_now());
  LG_RETURN_IF_ERROR(update.run());
  if (db_->changes() == 0) {
    return Status::not_found("adapter " + in_quotes(name) + " not found on base model " + in_quotes(base_model));
  }
  return commit_change(txn);
}

Status SqlRegistry::remove_adapter(const std::string& name, const std::string& base_model) {
  std::lock_guard lock(mu_);
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(*db_));
  LG_RETURN_IF_ERROR(check_adapter_unused(name, base_model, "remove"));
  LG_ASSIGN_OR_RETURN(Statement del, db_->prepare("DELETE FROM adapters WHERE name = ?1 AND base_model = ?2"));
  del.bind(1, name).bind(2, base_model);
  LG_RETURN_IF_ERROR(del.run());
  return commit_change(txn);
}

}  // namespace loragate::registry_detail
