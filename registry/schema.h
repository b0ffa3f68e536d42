// The registry's SQLite schema, as a numbered list of migrations.
//
// The version lives in the file header (PRAGMA user_version): 0 for a new,
// empty file, N once migration N has run. migrate() runs each missing
// migration in its own IMMEDIATE transaction, which also sets user_version,
// so a crash leaves the file at the last completed version and two processes
// migrating at once do not both run a step. A file whose version is newer
// than this build knows is refused, never written to.
//
// Rules for whoever adds version N+1: append to the list in schema.cpp; never
// edit a migration that has shipped (files made by it exist); bump
// kRegistrySchemaVersion; add a test that opens a file left at version N.
//
// Versions:
//   1  base_models, adapters, scenarios
//   2  indexes on the foreign-key child columns
//   3  several base generations: adapters keyed by (name, base_model);
//      base_models.dtype, .sha256, .error; state 'online' renamed 'serving';
//      base_swaps, the history of base swaps
//   4  evaluations, the history of evaluation runs
//   5  scenario_training, the training set of each scenario name
//   6  upgrades, the retrain-evaluate-promote runs
//   7  replicas and rollouts: a fleet sharing the registry
//
// Thread-safety: the functions use the SqliteDb they are given and follow its
// rules (one thread at a time).
#pragma once

#include <cstdint>

#include "common/status.h"
#include "registry/sqlite_db.h"

namespace loragate {

// The schema version this build writes and understands.
inline constexpr int64_t kRegistrySchemaVersion = 7;
// PRAGMA application_id of every registry file ("LGRG"), so that another
// program's SQLite database is not mistaken for one.
inline constexpr int64_t kRegistryApplicationId = 0x4C475247;

// The file's schema version (PRAGMA user_version).
Result<int64_t> schema_version(SqliteDb& db);

// Brings `db` to schema version `target` (the latest by default; a smaller
// target is for tests that need an old file). Refuses, changing nothing:
//   - a version above kRegistrySchemaVersion (unsupported),
//   - a target below the file's version (invalid_argument: no downgrades),
//   - another program's database: a foreign application_id, or tables in a
//     file without a version (invalid_argument).
// Each refusal names the file.
Status migrate(SqliteDb& db, int64_t target = kRegistrySchemaVersion);

// Sets a registry connection up (busy timeout, WAL, synchronous FULL,
// foreign keys); a file that is not a database fails here, as corrupt.
Status configure_registry_connection(SqliteDb& db);

}  // namespace loragate
