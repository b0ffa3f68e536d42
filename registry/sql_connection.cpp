#include "registry/sql_connection.h"

namespace loragate {

Status Statement::run() {
  for (;;) {
    LG_ASSIGN_OR_RETURN(const bool row, step());
    if (!row) return Status::ok();
  }
}

Result<int64_t> SqlConnection::query_int64(std::string_view sql) {
  LG_ASSIGN_OR_RETURN(Statement stmt, prepare(sql));
  LG_ASSIGN_OR_RETURN(const bool row, stmt.step());
  if (!row) return Status::internal("database '" + path() + "': no row from: " + std::string(sql));
  return stmt.column_int64(0);
}

Result<Transaction> Transaction::begin(SqlConnection& db) {
  LG_RETURN_IF_ERROR(db.begin_write());
  return Transaction(&db);
}

Transaction::~Transaction() {
  // A failed statement may already have rolled the transaction back.
  if (db_ != nullptr && db_->in_transaction()) db_->rollback();
}

Status Transaction::commit() {
  if (db_ == nullptr) return Status::internal("commit of a transaction that is already over");
  LG_RETURN_IF_ERROR(db_->commit());
  db_ = nullptr;
  return Status::ok();
}

}  // namespace loragate
