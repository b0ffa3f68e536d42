// The registry's PostgreSQL schema, as a numbered list of migrations that
// follows schema.h's versions: the same tables, columns, keys and indexes in
// PostgreSQL's types (BIGINT, DOUBLE PRECISION, identity columns, TEXT
// COLLATE "C" on the keys so that ORDER BY sorts bytes as SQLite does).
//
// The version lives in table loragate_schema (one row): a database without
// it is version 0. PostgreSQL support began at schema version 7, so the
// first PostgreSQL migration creates version 7 whole; later versions append
// to both lists. pg_migrate() runs under the registry's advisory lock in one
// transaction (PostgreSQL's DDL is transactional), so two replicas starting
// at once do not both migrate and a crash leaves the previous version. A
// version newer than this build knows is refused, never written to.
//
// Thread-safety: the functions use the connection they are given and follow
// its rules (one thread at a time).
#pragma once

#include <cstdint>

#include "common/status.h"
#include "registry/schema.h"
#include "registry/sql_connection.h"

namespace loragate {

// The database's schema version (0 when it has no loragate_schema table).
Result<int64_t> pg_schema_version(SqlConnection& db);

// Brings the PostgreSQL database behind `db` to schema version `target`
// (0 or 7 and above; the latest by default). Refuses, changing nothing:
//   - a version above kRegistrySchemaVersion (unsupported),
//   - a target below the database's version (invalid_argument),
//   - a database (schema on the search_path) that holds tables but no
//     loragate_schema: another program's (invalid_argument).
// Each refusal names the database.
Status pg_migrate(SqlConnection& db, int64_t target = kRegistrySchemaVersion);

}  // namespace loragate
