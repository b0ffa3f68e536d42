#include "registry/pg_schema.h"

#include <string>

namespace loragate {
namespace {

struct PgMigration {
  int64_t version;  // loragate_schema.version once this migration has run
  const char* sql;  // run inside the migration transaction
};

// Key and name columns are COLLATE "C": ORDER BY then sorts by bytes, as
// SQLite's BINARY collation does, whatever the database's locale. States
// are checked by the code (as in schema.cpp), not by CHECK.
constexpr PgMigration kPgMigrations[] = {
    // Schema version 7 whole: schema.cpp's migrations 1-7 as they leave a file.
    {7, R"sql(
CREATE TABLE base_models (
  name        TEXT COLLATE "C" NOT NULL PRIMARY KEY CHECK (length(name) > 0),
  path        TEXT   NOT NULL CHECK (length(path) > 0),
  state       TEXT   NOT NULL,  -- 'loading' | 'candidate' | 'serving' | 'previous' | 'failed' | 'retired'
  created_at  BIGINT NOT NULL,
  updated_at  BIGINT NOT NULL,
  dtype       TEXT   NOT NULL DEFAULT 'f32' CHECK (length(dtype) > 0),
  sha256      TEXT   NOT NULL DEFAULT '' CHECK (length(sha256) IN (0, 64)),
  error       TEXT   NOT NULL DEFAULT ''  -- why it failed, when 'failed'
);

CREATE TABLE adapters (
  name            TEXT COLLATE "C" NOT NULL CHECK (length(name) > 0),
  base_model      TEXT COLLATE "C" NOT NULL REFERENCES base_models (name) ON DELETE RESTRICT,
  path            TEXT   NOT NULL CHECK (length(path) > 0),
  rank            BIGINT NOT NULL CHECK (rank > 0),
  alpha           DOUBLE PRECISION NOT NULL CHECK (alpha > 0),
  target_modules  TEXT   NOT NULL,  -- JSON array of module names
  sha256          TEXT   NOT NULL CHECK (length(sha256) IN (0, 64)),  -- of adapter_model.safetensors
  size_bytes      BIGINT NOT NULL CHECK (size_bytes >= 0),
  state           TEXT   NOT NULL,  -- 'ready' | 'removing' | 'failed'
  created_at      BIGINT NOT NULL,
  updated_at      BIGINT NOT NULL,
  PRIMARY KEY (name, base_model)    -- also the parent key of scenarios' foreign key
);

CREATE TABLE scenarios (
  name        TEXT COLLATE "C" NOT NULL CHECK (length(name) > 0),
  base_model  TEXT COLLATE "C" NOT NULL REFERENCES base_models (name) ON DELETE RESTRICT,
  adapter     TEXT COLLATE "C" NOT NULL,
  created_at  BIGINT NOT NULL,
  updated_at  BIGINT NOT NULL,
  PRIMARY KEY (name, base_model),
  FOREIGN KEY (adapter, base_model) REFERENCES adapters (name, base_model) ON DELETE RESTRICT
);

CREATE INDEX adapters_by_base_model ON adapters (base_model);
CREATE INDEX scenarios_by_adapter ON scenarios (adapter, base_model);
CREATE INDEX scenarios_by_base_model ON scenarios (base_model);

CREATE TABLE base_swaps (
  id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- never reused, so ids order the history
  at         BIGINT NOT NULL,
  actor      TEXT   NOT NULL,
  from_base  TEXT   NOT NULL,  -- '' for the first base
  to_base    TEXT   NOT NULL,
  kind       TEXT   NOT NULL,  -- 'promote' | 'rollback'
  forced     BIGINT NOT NULL,  -- 0 | 1
  note       TEXT   NOT NULL
);

CREATE TABLE evaluations (
  id                BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  started_at        BIGINT NOT NULL,
  finished_at       BIGINT NOT NULL,
  online_base       TEXT   NOT NULL,
  online_sha256     TEXT   NOT NULL,
  candidate_base    TEXT   NOT NULL,
  candidate_sha256  TEXT   NOT NULL,
  adapters          TEXT   NOT NULL,  -- JSON {"<arm>/<scenario>": sha256 of adapter_model.safetensors}
  suite_sha256      TEXT   NOT NULL,
  gates_sha256      TEXT   NOT NULL,
  verdict           TEXT   NOT NULL,  -- 'pass' | 'fail' | 'inconclusive' | 'cancelled'
  report            TEXT   NOT NULL   -- the report JSON (evaluator/report.h)
);
CREATE INDEX evaluations_by_candidate ON evaluations (candidate_sha256, online_sha256, verdict);

CREATE TABLE scenario_training (
  scenario    TEXT COLLATE "C" NOT NULL PRIMARY KEY CHECK (length(scenario) > 0),
  path        TEXT   NOT NULL CHECK (length(path) > 0),
  sha256      TEXT   NOT NULL CHECK (length(sha256) = 64),  -- of the training file when recorded
  config      TEXT   NOT NULL,                              -- the TrainConfig JSON
  created_at  BIGINT NOT NULL,
  updated_at  BIGINT NOT NULL
);

CREATE TABLE upgrades (
  id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  started_at      BIGINT NOT NULL,
  updated_at      BIGINT NOT NULL,
  candidate       TEXT   NOT NULL,
  candidate_path  TEXT   NOT NULL,
  online_base     TEXT   NOT NULL,
  promote         BIGINT NOT NULL,  -- 0 | 1
  skip_untrained  BIGINT NOT NULL,  -- 0 | 1
  state           TEXT   NOT NULL,
  steps           TEXT   NOT NULL,  -- JSON array, one object per scenario
  verdict         TEXT   NOT NULL,
  evaluation      BIGINT NOT NULL,  -- the evaluation run's id; 0 = none yet
  report          TEXT   NOT NULL,
  error           TEXT   NOT NULL
);
CREATE INDEX upgrades_by_candidate ON upgrades (candidate, state);

CREATE TABLE replicas (
  url           TEXT COLLATE "C" NOT NULL PRIMARY KEY CHECK (length(url) > 0),
  serving       TEXT   NOT NULL,
  bases         TEXT   NOT NULL,  -- JSON array [{name, state}]
  adapters      TEXT   NOT NULL,  -- JSON array [{name, base}]
  desired_base  TEXT   NOT NULL,  -- '' = the fleet's serving base
  started_at    BIGINT NOT NULL,  -- unix seconds
  last_seen     BIGINT NOT NULL   -- unix milliseconds
);

CREATE TABLE rollouts (
  id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  started_at   BIGINT NOT NULL,
  updated_at   BIGINT NOT NULL,
  kind         TEXT   NOT NULL,  -- 'promote' | 'rollback'
  from_base    TEXT   NOT NULL,
  to_base      TEXT   NOT NULL,
  coordinator  TEXT   NOT NULL,
  state        TEXT   NOT NULL,  -- 'rolling' | 'done' | 'rolled_back' | 'failed'
  steps        TEXT   NOT NULL,
  error        TEXT   NOT NULL
);
)sql"},
};

static_assert(kPgMigrations[sizeof(kPgMigrations) / sizeof(kPgMigrations[0]) - 1].version == kRegistrySchemaVersion,
              "the PostgreSQL migrations reach the current schema version");

constexpr int64_t kPgFirstVersion = 7;

std::string pg_registry_name(SqlConnection& db) { return "registry '" + db.path() + "'"; }

// Refuses versions from the future and databases that are not (yet) ours.
Status pg_check_database(SqlConnection& db, int64_t version) {
  if (version > kRegistrySchemaVersion) {
    return Status::unsupported(pg_registry_name(db) + " has schema version " + std::to_string(version) +
                               ", newer than this build of loragate knows (" +
                               std::to_string(kRegistrySchemaVersion) +
                               "); run a newer loragate or point at another database");
  }
  if (version == 0) {
    LG_ASSIGN_OR_RETURN(const int64_t tables,
                        db.query_int64("SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema()"));
    if (tables > 0) {
      return Status::invalid_argument(pg_registry_name(db) + " holds " + std::to_string(tables) +
                                      " table(s) but no loragate_schema: not a loragate registry (give loragate "
                                      "a database or schema of its own)");
    }
  }
  return Status::ok();
}

}  // namespace

Result<int64_t> pg_schema_version(SqlConnection& db) {
  LG_ASSIGN_OR_RETURN(const int64_t exists,
                      db.query_int64("SELECT count(*) FROM pg_catalog.pg_tables"
                                     " WHERE schemaname = current_schema() AND tablename = 'loragate_schema'"));
  if (exists == 0) return int64_t{0};
  return db.query_int64("SELECT version FROM loragate_schema WHERE id = 1");
}

Status pg_migrate(SqlConnection& db, int64_t target) {
  if (target > kRegistrySchemaVersion || target < 0 || (target > 0 && target < kPgFirstVersion)) {
    return Status::invalid_argument("no PostgreSQL schema version " + std::to_string(target) +
                                    " to migrate to (PostgreSQL registries start at " +
                                    std::to_string(kPgFirstVersion) + "; the latest is " +
                                    std::to_string(kRegistrySchemaVersion) + ")");
  }
  LG_ASSIGN_OR_RETURN(int64_t version, pg_schema_version(db));
  if (version == target) return Status::ok();  // the common case: no lock taken
  // Every other check waits for the lock: unlocked, another replica's migration can commit
  // between reading "no loragate_schema" and counting tables, and its tables would make this
  // database look like someone else's.
  LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(db));
  // Another replica may have migrated between our read and the lock.
  LG_ASSIGN_OR_RETURN(version, pg_schema_version(db));
  LG_RETURN_IF_ERROR(pg_check_database(db, version));
  if (version > target) {
    return Status::invalid_argument(pg_registry_name(db) + " is at schema version " + std::to_string(version) +
                                    "; cannot downgrade it to " + std::to_string(target));
  }
  if (version == target) return Status::ok();
  const std::string context = pg_registry_name(db) + ": migration to schema version " + std::to_string(target);
  if (version == 0) {
    LG_RETURN_IF_ERROR(db.exec("CREATE TABLE loragate_schema ("
                               " id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),"
                               " version BIGINT NOT NULL);"
                               " INSERT INTO loragate_schema (id, version) VALUES (1, 0)")
                           .with_context(context));
  }
  for (const PgMigration& m : kPgMigrations) {
    if (m.version <= version || m.version > target) continue;
    LG_RETURN_IF_ERROR(db.exec(m.sql).with_context(context));
  }
  LG_RETURN_IF_ERROR(
      db.exec("UPDATE loragate_schema SET version = " + std::to_string(target) + " WHERE id = 1").with_context(context));
  return txn.commit().with_context(context);
}

}  // namespace loragate
