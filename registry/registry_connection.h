// Opening a registry's database, either backend: the SQLite file at a path
// (configured: busy timeout, WAL, foreign keys; migrated by schema.h) or the
// PostgreSQL database of a "postgresql://" URL (migrated by pg_schema.h).
// Registry::open, EvaluationStore::open and UpgradeStore::open all start
// here, so the three agree on what a registry location means.
//
// Thread-safety: the functions are safe to call from any thread; the
// connection returned follows sql_connection.h's rules.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "registry/sql_connection.h"

namespace loragate {

// A connection to the registry at `path` (see Registry::open), its schema
// brought to the current version. Errors name the path (never a password).
Result<std::unique_ptr<SqlConnection>> open_registry_connection(const std::string& path);

}  // namespace loragate
