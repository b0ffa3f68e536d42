// SqlRegistry's row readers, commit_change and Registry::open; the class
// itself is in sql_registry.h, the opening of its database in
// registry_connection.h.
#include <chrono>
#include <mutex>
#include <utility>

#include <nlohmann/json.hpp>

#include "registry/pg_listener.h"
#include "registry/registry.h"
#include "registry/registry_connection.h"
#include "registry/sql_connection.h"
#include "registry/sql_registry.h"

namespace loragate {
namespace registry_detail {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string in_quotes(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.append(1, '\'').append(s).append(1, '\'');
  return out;
}

Status SqlRegistry::commit_change(Transaction& txn) {
  LG_RETURN_IF_ERROR(db_->notify_change());
  LG_RETURN_IF_ERROR(txn.commit());
  ++own_changes_;
  return Status::ok();
}

// --- rows ---------------------------------------------------------------------

Result<BaseModelRecord> SqlRegistry::read_base_model(const Statement& row) const {
  BaseModelRecord r;
  r.name = row.column_text(0);
  r.path = row.column_text(1);
  auto state = parse_base_model_state(row.column_text(2));
  if (!state) return Status::corrupt("registry " + in_quotes(db_->path()) + ": base model " + in_quotes(r.name) + ": " +
                                     state.status().message());
  r.state = *state;
  r.dtype = row.column_text(3);
  r.sha256 = row.column_text(4);
  r.error = row.column_text(5);
  r.created_at = row.column_int64(6);
  r.updated_at = row.column_int64(7);
  return r;
}

Result<AdapterRecord> SqlRegistry::read_adapter(const Statement& row) const {
  AdapterRecord r;
  r.name = row.column_text(0);
  r.base_model = row.column_text(1);
  const std::string where = "registry " + in_quotes(db_->path()) + ": adapter " + in_quotes(r.name) +
                            " on base model " + in_quotes(r.base_model);
  r.path = row.column_text(2);
  r.rank = row.column_int64(3);
  r.alpha = row.column_double(4);
  const std::string modules_json = row.column_text(5);
  const nlohmann::json modules = nlohmann::json::parse(modules_json, nullptr, /*allow_exceptions=*/false);
  if (!modules.is_array()) return Status::corrupt(where + ": target_modules is not a JSON array: " + modules_json);
  for (const auto& m : modules) {
    if (!m.is_string()) return Status::corrupt(where + ": target_modules holds a non-string: " + modules_json);
    r.target_modules.push_back(m.get<std::string>());
  }
  r.sha256 = row.column_text(6);
  r.size_bytes = row.column_int64(7);
  auto state = parse_adapter_state(row.column_text(8));
  if (!state) return Status::corrupt(where + ": " + state.status().message());
  r.state = *state;
  r.created_at = row.column_int64(9);
  r.updated_at = row.column_int64(10);
  return r;
}

ScenarioRecord SqlRegistry::read_scenario(const Statement& row) {
  ScenarioRecord r;
  r.name = row.column_text(0);
  r.base_model = row.column_text(1);
  r.adapter = row.column_text(2);
  r.created_at = row.column_int64(3);
  r.updated_at = row.column_int64(4);
  return r;
}

Result<SwapRecord> SqlRegistry::read_swap(const Statement& row) const {
  SwapRecord r;
  r.id = row.column_int64(0);
  r.at = row.column_int64(1);
  r.actor = row.column_text(2);
  r.from_base = row.column_text(3);
  r.to_base = row.column_text(4);
  r.kind = row.column_text(5);
  r.forced = row.column_int64(6) != 0;
  r.note = row.column_text(7);
  if (r.kind != kSwapKindPromote && r.kind != kSwapKindRollback) {
    return Status::corrupt("registry " + in_quotes(db_->path()) + ": swap " + std::to_string(r.id) + " to base model " +
                           in_quotes(r.to_base) + ": unknown kind " + in_quotes(r.kind) +
                           " (expected promote or rollback)");
  }
  return r;
}

}  // namespace registry_detail

Result<std::unique_ptr<Registry>> Registry::open(const std::string& path) {
  LG_ASSIGN_OR_RETURN(std::unique_ptr<SqlConnection> db, open_registry_connection(path));
  std::unique_ptr<PgChangeListener> listener;
  if (is_postgres_url(path)) listener = std::make_unique<PgChangeListener>(path);
  return std::unique_ptr<Registry>(new registry_detail::SqlRegistry(std::move(db), std::move(listener)));
}

}  // namespace loragate
