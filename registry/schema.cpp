#include "registry/schema.h"

#include <string>

namespace loragate {
namespace {

struct Migration {
  int64_t version;     // user_version once this migration has run
  const char* sql;     // run inside the migration's transaction
};

// Types are STRICT (SQLite >= 3.37): a text in an INTEGER column is an error,
// not a silent conversion. Times are unix seconds (UTC). States are checked by
// the code on every write and read rather than by CHECK, so that a new state
// does not need a table rebuild.
constexpr Migration kMigrations[] = {
    {1, R"sql(
PRAGMA application_id = 1279742535;

CREATE TABLE base_models (
  name        TEXT    NOT NULL PRIMARY KEY CHECK (length(name) > 0),
  path        TEXT    NOT NULL CHECK (length(path) > 0),
  state       TEXT    NOT NULL,             -- 'online' | 'candidate' | 'retired'
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE adapters (
  name            TEXT    NOT NULL PRIMARY KEY CHECK (length(name) > 0),
  base_model      TEXT    NOT NULL REFERENCES base_models (name) ON DELETE RESTRICT,
  path            TEXT    NOT NULL CHECK (length(path) > 0),
  rank            INTEGER NOT NULL CHECK (rank > 0),
  alpha           REAL    NOT NULL CHECK (alpha > 0),
  target_modules  TEXT    NOT NULL,         -- JSON array of module names
  sha256          TEXT    NOT NULL CHECK (length(sha256) IN (0, 64)),  -- of adapter_model.safetensors
  size_bytes      INTEGER NOT NULL CHECK (size_bytes >= 0),
  state           TEXT    NOT NULL,         -- 'ready' | 'removing' | 'failed'
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  UNIQUE (name, base_model)                 -- the parent key of scenarios' foreign key
) STRICT;

-- A scenario routes (name, base_model) to one adapter of that same base: the
-- composite foreign key makes "an adapter of another base" impossible, and
-- RESTRICT refuses to delete an adapter that a scenario still uses.
CREATE TABLE scenarios (
  name        TEXT    NOT NULL CHECK (length(name) > 0),
  base_model  TEXT    NOT NULL REFERENCES base_models (name) ON DELETE RESTRICT,
  adapter     TEXT    NOT NULL,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL,
  PRIMARY KEY (name, base_model),
  FOREIGN KEY (adapter, base_model) REFERENCES adapters (name, base_model) ON DELETE RESTRICT
) STRICT;
)sql"},
    // Without an index on a child column, every delete of a parent row scans
    // the child table to enforce the foreign key; listing by base scans too.
    {2, R"sql(
CREATE INDEX adapters_by_base_model ON adapters (base_model);
CREATE INDEX scenarios_by_adapter ON scenarios (adapter, base_model);
CREATE INDEX scenarios_by_base_model ON scenarios (base_model);
)sql"},
    // Several base generations: an adapter name is a tenant's handle on each
    // base, so adapters are keyed by (name, base_model). SQLite cannot change
    // a primary key in place, and foreign_keys cannot be switched off inside
    // this transaction, so both tables are rebuilt child-last: the new
    // scenarios references the new adapters, the old tables are dropped child
    // first (their implicit DELETEs break no key), and the renames (SQLite >=
    // 3.26 rewrites the references) give the new tables the old names. The
    // drops take migration 2's indexes with them; they are made again.
    // base_models gains what a base swap needs, and 'online' is now 'serving'.
    // base_swaps names bases as text, without foreign keys: the history of
    // swaps outlives the bases it mentions.
    {3, R"sql(
CREATE TABLE adapters_v3 (
  name            TEXT    NOT NULL CHECK (length(name) > 0),
  base_model      TEXT    NOT NULL REFERENCES base_models (name) ON DELETE RESTRICT,
  path            TEXT    NOT NULL CHECK (length(path) > 0),
  rank            INTEGER NOT NULL CHECK (rank > 0),
  alpha           REAL    NOT NULL CHECK (alpha > 0),
  target_modules  TEXT    NOT NULL,         -- JSON array of module names
  sha256          TEXT    NOT NULL CHECK (length(sha256) IN (0, 64)),  -- of adapter_model.safetensors
  size_bytes      INTEGER NOT NULL CHECK (size_bytes >= 0),
  state           TEXT    NOT NULL,         -- 'ready' | 'removing' | 'failed'
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  PRIMARY KEY (name, base_model)            -- also the parent key of scenarios' foreign key
) STRICT;

CREATE TABLE scenarios_v3 (
  name        TEXT    NOT NULL CHECK (length(name) > 0),
  base_model  TEXT    NOT NULL REFERENCES base_models (name) ON DELETE RESTRICT,
  adapter     TEXT    NOT NULL,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL,
  PRIMARY KEY (name, base_model),
  FOREIGN KEY (adapter, base_model) REFERENCES adapters_v3 (name, base_model) ON DELETE RESTRICT
) STRICT;

INSERT INTO adapters_v3 (name, base_model, path, rank, alpha, target_modules, sha256, size_bytes, state,
                         created_at, updated_at)
  SELECT name, base_model, path, rank, alpha, target_modules, sha256, size_bytes, state, created_at, updated_at
  FROM adapters;
INSERT INTO scenarios_v3 (name, base_model, adapter, created_at, updated_at)
  SELECT name, base_model, adapter, created_at, updated_at FROM scenarios;

DROP TABLE scenarios;
DROP TABLE adapters;
ALTER TABLE adapters_v3 RENAME TO adapters;
ALTER TABLE scenarios_v3 RENAME TO scenarios;

CREATE INDEX adapters_by_base_model ON adapters (base_model);
CREATE INDEX scenarios_by_adapter ON scenarios (adapter, base_model);
CREATE INDEX scenarios_by_base_model ON scenarios (base_model);

-- state: 'loading' | 'candidate' | 'serving' | 'previous' | 'failed' | 'retired'
ALTER TABLE base_models ADD COLUMN dtype TEXT NOT NULL DEFAULT 'f32' CHECK (length(dtype) > 0);
ALTER TABLE base_models ADD COLUMN sha256 TEXT NOT NULL DEFAULT '' CHECK (length(sha256) IN (0, 64));
ALTER TABLE base_models ADD COLUMN error TEXT NOT NULL DEFAULT '';  -- why it failed, when 'failed'
UPDATE base_models SET state = 'serving' WHERE state = 'online';

CREATE TABLE base_swaps (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused, so ids order the history
  at         INTEGER NOT NULL,
  actor      TEXT    NOT NULL,
  from_base  TEXT    NOT NULL,                   -- '' for the first base
  to_base    TEXT    NOT NULL,
  kind       TEXT    NOT NULL,                   -- 'promote' | 'rollback'
  forced     INTEGER NOT NULL,                   -- 0 | 1
  note       TEXT    NOT NULL
) STRICT;
)sql"},
    // Evaluation runs of the evaluator: the identity columns for queries (the
    // latest passing run of a candidate against a serving base), the whole
    // report as JSON (per-item outputs, suite and gates text, gate verdicts)
    // so that a stored run can be re-judged. Names and hashes as text: the
    // history outlives the bases and adapters it mentions.
    {4, R"sql(
CREATE TABLE evaluations (
  id                INTEGER PRIMARY KEY AUTOINCREMENT,
  started_at        INTEGER NOT NULL,
  finished_at       INTEGER NOT NULL,
  online_base       TEXT    NOT NULL,
  online_sha256     TEXT    NOT NULL,
  candidate_base    TEXT    NOT NULL,
  candidate_sha256  TEXT    NOT NULL,
  adapters          TEXT    NOT NULL,  -- JSON {"<arm>/<scenario>": sha256 of adapter_model.safetensors}
  suite_sha256      TEXT    NOT NULL,
  gates_sha256      TEXT    NOT NULL,
  verdict           TEXT    NOT NULL,  -- 'pass' | 'fail' | 'inconclusive'
  report            TEXT    NOT NULL   -- the report JSON (evaluator/report.h)
) STRICT;
CREATE INDEX evaluations_by_candidate ON evaluations (candidate_sha256, online_sha256, verdict);
)sql"},
    // Scenarios own their training data: the file (as the server resolved it,
    // with its sha256 when recorded) and the training config an upgrade
    // retrains the scenario's adapter with. Keyed by the scenario's name, not
    // (name, base_model): the scenario on every base shares it, so no foreign
    // key; the registry removes a row with the last scenario of its name.
    {5, R"sql(
CREATE TABLE scenario_training (
  scenario    TEXT    NOT NULL PRIMARY KEY CHECK (length(scenario) > 0),
  path        TEXT    NOT NULL CHECK (length(path) > 0),
  sha256      TEXT    NOT NULL CHECK (length(sha256) = 64),  -- of the training file when recorded
  config      TEXT    NOT NULL,                              -- the TrainConfig JSON (trainer/train_config.h)
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL
) STRICT;
)sql"},
    // Upgrades (upgrade/upgrade_job.h): retrain every scenario's adapter on a
    // candidate base, evaluate, promote. A row is written at every step, so a
    // restart finds the unfinished ones (and shows them interrupted) and a new
    // request for the same candidate resumes from the steps it kept. Steps as
    // JSON; names as text: the history outlives the bases it mentions.
    {6, R"sql(
CREATE TABLE upgrades (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  started_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  candidate       TEXT    NOT NULL,
  candidate_path  TEXT    NOT NULL,
  online_base     TEXT    NOT NULL,
  promote         INTEGER NOT NULL,  -- 0 | 1: promote when the evaluation passes
  skip_untrained  INTEGER NOT NULL,  -- 0 | 1: scenarios without a training set do not block it
  state           TEXT    NOT NULL,  -- 'queued' | 'training' | 'evaluating' | 'promoting' | 'passed' | 'failed'
                                     -- | 'promoted' | 'cancelled' | 'interrupted'
  steps           TEXT    NOT NULL,  -- JSON array, one object per scenario
  verdict         TEXT    NOT NULL,  -- '' until judged; 'pass' | 'fail' | 'inconclusive'
  evaluation      INTEGER NOT NULL,  -- the evaluation run's id; 0 = none yet
  report          TEXT    NOT NULL,  -- the report's path; '' = none yet
  error           TEXT    NOT NULL
) STRICT;
CREATE INDEX upgrades_by_candidate ON upgrades (candidate, state);
)sql"},
    // A fleet (fleet/): the replicas sharing this registry, each as its last
    // heartbeat left it (desired_base: the base a rollout asks it to serve),
    // and the rollouts that swapped the fleet's base replica by replica.
    {7, R"sql(
CREATE TABLE replicas (
  url           TEXT    NOT NULL PRIMARY KEY CHECK (length(url) > 0),
  serving       TEXT    NOT NULL,
  bases         TEXT    NOT NULL,  -- JSON array [{name, state}]
  adapters      TEXT    NOT NULL,  -- JSON array [{name, base}]
  desired_base  TEXT    NOT NULL,  -- '' = the fleet's serving base
  started_at    INTEGER NOT NULL,  -- unix seconds
  last_seen     INTEGER NOT NULL   -- unix milliseconds
) STRICT;
CREATE TABLE rollouts (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  started_at   INTEGER NOT NULL,
  updated_at   INTEGER NOT NULL,
  kind         TEXT    NOT NULL,  -- 'promote' | 'rollback'
  from_base    TEXT    NOT NULL,
  to_base      TEXT    NOT NULL,
  coordinator  TEXT    NOT NULL,  -- the url of the replica that drives it
  state        TEXT    NOT NULL,  -- 'rolling' | 'done' | 'rolled_back' | 'failed'
  steps        TEXT    NOT NULL,  -- JSON array, one object per replica swapped
  error        TEXT    NOT NULL
) STRICT;
)sql"},
};

static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kRegistrySchemaVersion,
              "one migration per schema version");
static_assert(kRegistryApplicationId == 1279742535, "migration 1 writes this application_id");

std::string in_quotes(const SqliteDb& db) { return "'" + db.path() + "'"; }

// Refuses files that are not (or not yet) ours, and versions from the future.
Status check_file(SqliteDb& db, int64_t version) {
  LG_ASSIGN_OR_RETURN(const int64_t app_id, db.query_int64("PRAGMA application_id"));
  if (app_id != 0 && app_id != kRegistryApplicationId) {
    return Status::invalid_argument("registry " + in_quotes(db) +
                                    " is a SQLite database of another program (application_id " +
                                    std::to_string(app_id) + "), not a loragate registry");
  }
  if (version > kRegistrySchemaVersion) {
    return Status::unsupported("registry " + in_quotes(db) + " has schema version " + std::to_string(version) +
                               ", newer than this build of loragate knows (" +
                               std::to_string(kRegistrySchemaVersion) +
                               "); run a newer loragate or point at another file");
  }
  if (version == 0) {
    LG_ASSIGN_OR_RETURN(const int64_t tables,
                        db.query_int64("SELECT count(*) FROM sqlite_schema WHERE type = 'table'"));
    if (tables > 0) {
      return Status::invalid_argument("registry " + in_quotes(db) + " holds " + std::to_string(tables) +
                                      " table(s) but no loragate schema version: not a loragate registry");
    }
  }
  return Status::ok();
}

}  // namespace

Result<int64_t> schema_version(SqliteDb& db) { return db.query_int64("PRAGMA user_version"); }

Status migrate(SqliteDb& db, int64_t target) {
  if (target < 0 || target > kRegistrySchemaVersion) {
    return Status::invalid_argument("no schema version " + std::to_string(target) + " to migrate to (latest is " +
                                    std::to_string(kRegistrySchemaVersion) + ")");
  }
  LG_ASSIGN_OR_RETURN(int64_t version, schema_version(db));
  // A file at version 0 is checked only under the lock: unlocked, another connection's first
  // migration can commit between reading the version and counting tables, and its tables would
  // make the file look like another program's.
  if (version != 0) LG_RETURN_IF_ERROR(check_file(db, version));
  if (version > target) {
    return Status::invalid_argument("registry " + in_quotes(db) + " is at schema version " + std::to_string(version) +
                                    "; cannot downgrade it to " + std::to_string(target));
  }
  for (const Migration& m : kMigrations) {
    if (m.version <= version || m.version > target) continue;
    LG_ASSIGN_OR_RETURN(Transaction txn, Transaction::begin(db));
    // Another connection may have migrated between our read and the lock.
    LG_ASSIGN_OR_RETURN(version, schema_version(db));
    LG_RETURN_IF_ERROR(check_file(db, version));
    if (m.version <= version) continue;
    const std::string context =
        "registry " + in_quotes(db) + ": migration to schema version " + std::to_string(m.version);
    Status status = db.exec(m.sql);
    if (status.is_ok()) status = db.exec("PRAGMA user_version = " + std::to_string(m.version));
    if (status.is_ok()) status = txn.commit();
    if (!status.is_ok()) return status.with_context(context);
    version = m.version;
  }
  return Status::ok();
}

}  // namespace loragate
