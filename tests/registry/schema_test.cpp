// Schema migrations on real files: a fresh file, a file left at version 1
// (by the migration code and by a frozen copy of the v1 DDL), a file left at
// version 2 with data (and its foreign keys after the table rebuild of
// version 3), a file at the latest version reopened, files from the future,
// other programs' databases and files that are not databases.
#include "registry/schema.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "registry/registry.h"
#include "registry/sqlite_db.h"
#include "tests/registry/registry_fixtures.h"

namespace loragate {
namespace {

// Schema version 1 exactly as it shipped. Never update this copy: it stands
// for files already on disk, which every later build must still migrate.
constexpr const char* kFrozenV1 = R"sql(
PRAGMA application_id = 1279742535;
CREATE TABLE base_models (
  name        TEXT    NOT NULL PRIMARY KEY CHECK (length(name) > 0),
  path        TEXT    NOT NULL CHECK (length(path) > 0),
  state       TEXT    NOT NULL,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL
) STRICT;
CREATE TABLE adapters (
  name            TEXT    NOT NULL PRIMARY KEY CHECK (length(name) > 0),
  base_model      TEXT    NOT NULL REFERENCES base_models (name) ON DELETE RESTRICT,
  path            TEXT    NOT NULL CHECK (length(path) > 0),
  rank            INTEGER NOT NULL CHECK (rank > 0),
  alpha           REAL    NOT NULL CHECK (alpha > 0),
  target_modules  TEXT    NOT NULL,
  sha256          TEXT    NOT NULL CHECK (length(sha256) IN (0, 64)),
  size_bytes      INTEGER NOT NULL CHECK (size_bytes >= 0),
  state           TEXT    NOT NULL,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  UNIQUE (name, base_model)
) STRICT;
CREATE TABLE scenarios (
  name        TEXT    NOT NULL CHECK (length(name) > 0),
  base_model  TEXT    NOT NULL REFERENCES base_models (name) ON DELETE RESTRICT,
  adapter     TEXT    NOT NULL,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL,
  PRIMARY KEY (name, base_model),
  FOREIGN KEY (adapter, base_model) REFERENCES adapters (name, base_model) ON DELETE RESTRICT
) STRICT;
PRAGMA user_version = 1;
)sql";

// Columns named: later versions add columns to base_models.
constexpr const char* kV1Rows = R"sql(
INSERT INTO base_models (name, path, state, created_at, updated_at) VALUES ('llama-a', '/models/a', 'online', 100, 100);
INSERT INTO adapters VALUES ('sql', 'llama-a', '/adapters/sql', 8, 16.0, '["q_proj","v_proj"]', '', 4096,
                             'ready', 200, 200);
INSERT INTO scenarios VALUES ('text2sql', 'llama-a', 'sql', 300, 300);
)sql";

class SchemaTest : public testing::TempDirTest {
 protected:
  std::unique_ptr<SqliteDb> raw(const std::string& file) {
    auto db = SqliteDb::open(path(file));
    EXPECT_TRUE(db.is_ok()) << db.status().to_string();
    return db.is_ok() ? std::move(db).value() : nullptr;
  }
  int64_t count(SqliteDb& db, const std::string& type, const std::string& name) {
    auto n = db.query_int64("SELECT count(*) FROM sqlite_schema WHERE type = '" + type + "' AND name = '" +
                            name + "'");
    EXPECT_TRUE(n.is_ok()) << n.status().to_string();
    return n.is_ok() ? *n : -1;
  }
  // Opens `file` with the Registry and checks the v1 rows came through.
  void expect_v1_rows_after_open(const std::string& file) {
    auto reg = Registry::open(path(file));
    ASSERT_TRUE(reg.is_ok()) << reg.status().to_string();
    auto a = (*reg)->get_adapter("sql", "llama-a");
    ASSERT_TRUE(a.is_ok()) << a.status().to_string();
    EXPECT_EQ(a->base_model, "llama-a");
    EXPECT_EQ(a->created_at, 200);
    EXPECT_EQ(a->target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
    EXPECT_EQ((*reg)->resolve_scenario("text2sql", "llama-a").value(), "sql");
    auto base = (*reg)->get_base_model("llama-a");
    ASSERT_TRUE(base.is_ok()) << base.status().to_string();
    EXPECT_EQ(base->created_at, 100);
    EXPECT_EQ(base->state, BaseModelState::kServing);  // was 'online'
    EXPECT_EQ(base->dtype, "f32");
    EXPECT_EQ(base->sha256, "");
    EXPECT_EQ(base->error, "");
    EXPECT_TRUE((*reg)->list_swaps()->empty());
    // And it still enforces the rules after the migration.
    EXPECT_EQ((*reg)->remove_adapter("sql", "llama-a").code(), StatusCode::kFailedPrecondition);
    reg->reset();
    auto db = raw(file);
    EXPECT_EQ(schema_version(*db).value(), kRegistrySchemaVersion);
    expect_latest_schema_objects(*db);
    EXPECT_EQ(db->query_int64("SELECT count(*) FROM base_models WHERE state = 'online'").value(), 0);
  }
  // The tables, indexes and foreign keys of the latest version, and no
  // leftovers of the rebuild.
  void expect_latest_schema_objects(SqliteDb& db) {
    for (const char* table : {"base_models", "adapters", "scenarios", "base_swaps", "evaluations",
                              "scenario_training", "upgrades"}) {
      EXPECT_EQ(count(db, "table", table), 1) << table;
    }
    for (const char* index : {"adapters_by_base_model", "scenarios_by_adapter", "scenarios_by_base_model"}) {
      EXPECT_EQ(count(db, "index", index), 1) << index;
    }
    EXPECT_EQ(count(db, "table", "adapters_v3"), 0);
    EXPECT_EQ(count(db, "table", "scenarios_v3"), 0);
    auto q = db.prepare("SELECT sql FROM sqlite_schema WHERE name = 'scenarios'");
    ASSERT_TRUE(q.is_ok());
    ASSERT_TRUE(q->step().value());
    const std::string ddl = q->column_text(0);
    EXPECT_EQ(ddl.find("adapters_v3"), std::string::npos) << ddl;
    EXPECT_NE(ddl.find("REFERENCES \"adapters\""), std::string::npos) << ddl;
  }
  // Whatever the registry checks, the file itself refuses what breaks a key.
  void expect_foreign_keys_enforced(SqliteDb& db) {
    ASSERT_OK(db.exec("PRAGMA foreign_keys = ON"));
    EXPECT_STATUS(db.exec("DELETE FROM adapters WHERE name = 'sql' AND base_model = 'llama-a'"),
                  StatusCode::kInvalidArgument, "FOREIGN KEY constraint failed");
    EXPECT_STATUS(db.exec("INSERT INTO scenarios VALUES ('x', 'llama-a', 'ghost', 1, 1)"),
                  StatusCode::kInvalidArgument, "FOREIGN KEY constraint failed");
    EXPECT_STATUS(db.exec("DELETE FROM base_models WHERE name = 'llama-a'"), StatusCode::kInvalidArgument,
                  "FOREIGN KEY constraint failed");
    EXPECT_EQ(db.query_int64("SELECT count(*) FROM scenarios").value(), 1);
  }
};

TEST_F(SchemaTest, FreshFileGetsTheLatestSchema) {
  auto db = raw("fresh.db");
  EXPECT_EQ(schema_version(*db).value(), 0);
  ASSERT_OK(migrate(*db));
  EXPECT_EQ(schema_version(*db).value(), kRegistrySchemaVersion);
  EXPECT_EQ(db->query_int64("PRAGMA application_id").value(), kRegistryApplicationId);
  expect_latest_schema_objects(*db);
  ASSERT_OK(migrate(*db));  // a second run is a no-op
  EXPECT_EQ(schema_version(*db).value(), kRegistrySchemaVersion);
}

TEST_F(SchemaTest, RegistryOpenSetsTheConnectionPragmas) {
  auto reg = Registry::open(path("reg.db"));
  ASSERT_TRUE(reg.is_ok()) << reg.status().to_string();
  auto db = raw("reg.db");
  auto q = db->prepare("PRAGMA journal_mode");
  ASSERT_TRUE(q.is_ok());
  ASSERT_TRUE(q->step().value());
  EXPECT_EQ(q->column_text(0), "wal");  // persistent in the file
  EXPECT_EQ(schema_version(*db).value(), kRegistrySchemaVersion);
}

TEST_F(SchemaTest, FileStoppedAtVersion1ByTheMigrationCodeMigrates) {
  {
    auto db = raw("v1.db");
    ASSERT_OK(migrate(*db, 1));
    EXPECT_EQ(schema_version(*db).value(), 1);
    EXPECT_EQ(count(*db, "index", "adapters_by_base_model"), 0);
    ASSERT_OK(db->exec(kV1Rows));
  }
  expect_v1_rows_after_open("v1.db");
}

// Version 2, with a base, two adapters and a scenario written by hand as a
// version-2 loragate wrote them; version 3 rebuilds adapters and scenarios.
TEST_F(SchemaTest, FileStoppedAtVersion2WithDataMigrates) {
  {
    auto db = raw("v2.db");
    ASSERT_OK(migrate(*db, 2));
    EXPECT_EQ(schema_version(*db).value(), 2);
    EXPECT_EQ(count(*db, "table", "base_swaps"), 0);
    ASSERT_OK(db->exec("PRAGMA foreign_keys = ON"));
    ASSERT_OK(db->exec(R"sql(
INSERT INTO base_models VALUES ('llama-a', '/models/a', 'online', 100, 110);
INSERT INTO base_models VALUES ('llama-b', '/models/b', 'candidate', 120, 130);
INSERT INTO adapters VALUES ('sql', 'llama-a', '/adapters/sql', 8, 16.0, '["q_proj","v_proj"]',
                             '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef', 4096,
                             'ready', 200, 210);
INSERT INTO adapters VALUES ('chat', 'llama-a', '/adapters/chat', 4, 4.5, '[]', '', 0, 'failed', 220, 230);
INSERT INTO scenarios VALUES ('text2sql', 'llama-a', 'sql', 300, 310);
)sql"));
  }
  {
    auto reg = Registry::open(path("v2.db"));
    ASSERT_TRUE(reg.is_ok()) << reg.status().to_string();
    auto bases = (*reg)->list_base_models();
    ASSERT_TRUE(bases.is_ok()) << bases.status().to_string();
    ASSERT_EQ(bases->size(), 2u);
    EXPECT_EQ((*bases)[0].name, "llama-a");
    EXPECT_EQ((*bases)[0].path, "/models/a");
    EXPECT_EQ((*bases)[0].state, BaseModelState::kServing);
    EXPECT_EQ((*bases)[0].dtype, "f32");
    EXPECT_EQ((*bases)[0].sha256, "");
    EXPECT_EQ((*bases)[0].error, "");
    EXPECT_EQ((*bases)[0].created_at, 100);
    EXPECT_EQ((*bases)[0].updated_at, 110);
    EXPECT_EQ((*bases)[1].name, "llama-b");
    EXPECT_EQ((*bases)[1].state, BaseModelState::kCandidate);
    EXPECT_EQ((*bases)[1].updated_at, 130);

    auto adapters = (*reg)->list_adapters();
    ASSERT_TRUE(adapters.is_ok()) << adapters.status().to_string();
    ASSERT_EQ(adapters->size(), 2u);
    const AdapterRecord& chat = (*adapters)[0];
    EXPECT_EQ(chat.name, "chat");
    EXPECT_EQ(chat.base_model, "llama-a");
    EXPECT_EQ(chat.path, "/adapters/chat");
    EXPECT_EQ(chat.rank, 4);
    EXPECT_DOUBLE_EQ(chat.alpha, 4.5);
    EXPECT_TRUE(chat.target_modules.empty());
    EXPECT_EQ(chat.sha256, "");
    EXPECT_EQ(chat.state, AdapterState::kFailed);
    EXPECT_EQ(chat.created_at, 220);
    EXPECT_EQ(chat.updated_at, 230);
    const AdapterRecord& sql = (*adapters)[1];
    EXPECT_EQ(sql.name, "sql");
    EXPECT_EQ(sql.rank, 8);
    EXPECT_DOUBLE_EQ(sql.alpha, 16.0);
    EXPECT_EQ(sql.target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
    EXPECT_EQ(sql.sha256, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    EXPECT_EQ(sql.size_bytes, 4096);
    EXPECT_EQ(sql.state, AdapterState::kReady);
    EXPECT_EQ(sql.created_at, 200);

    auto scenarios = (*reg)->list_scenarios();
    ASSERT_TRUE(scenarios.is_ok()) << scenarios.status().to_string();
    ASSERT_EQ(scenarios->size(), 1u);
    EXPECT_EQ((*scenarios)[0].name, "text2sql");
    EXPECT_EQ((*scenarios)[0].base_model, "llama-a");
    EXPECT_EQ((*scenarios)[0].adapter, "sql");
    EXPECT_EQ((*scenarios)[0].created_at, 300);
    EXPECT_EQ((*scenarios)[0].updated_at, 310);
    EXPECT_TRUE((*reg)->list_swaps()->empty());

    // The new key: the same name on the other base is now a separate adapter.
    EXPECT_TRUE((*reg)->add_adapter(testing::adapter("sql", "llama-b")).is_ok());
    EXPECT_STATUS((*reg)->remove_adapter("sql", "llama-a"), StatusCode::kFailedPrecondition, "'text2sql'");
  }
  auto db = raw("v2.db");
  EXPECT_EQ(schema_version(*db).value(), kRegistrySchemaVersion);
  expect_latest_schema_objects(*db);
  expect_foreign_keys_enforced(*db);
  // The new primary key refuses a duplicate (name, base_model).
  EXPECT_STATUS(db->exec("INSERT INTO adapters VALUES ('sql', 'llama-a', '/a', 8, 16.0, '[]', '', 0, 'ready', 1, 1)"),
                StatusCode::kInvalidArgument, "UNIQUE");
  auto check = db->prepare("PRAGMA foreign_key_check");
  ASSERT_TRUE(check.is_ok());
  EXPECT_FALSE(check->step().value()) << "a row breaks a foreign key";
}

// A version-2 file whose rows break a key (written with foreign_keys off):
// the rebuild fails, and its transaction leaves the file exactly at version 2.
TEST_F(SchemaTest, FailedMigrationLeavesTheFileAtItsVersion) {
  {
    auto db = raw("bad-v2.db");
    ASSERT_OK(migrate(*db, 2));
    ASSERT_OK(db->exec(kV1Rows));
    ASSERT_OK(db->exec("INSERT INTO scenarios VALUES ('orphan', 'llama-a', 'ghost', 1, 1)"));  // foreign_keys off
  }
  auto reg = Registry::open(path("bad-v2.db"));
  EXPECT_STATUS(reg.status(), StatusCode::kInvalidArgument, "migration to schema version 3");
  EXPECT_STATUS(reg.status(), StatusCode::kInvalidArgument, "FOREIGN KEY constraint failed");
  auto db = raw("bad-v2.db");
  EXPECT_EQ(schema_version(*db).value(), 2);
  EXPECT_EQ(count(*db, "table", "adapters_v3"), 0);
  EXPECT_EQ(count(*db, "table", "base_swaps"), 0);
  EXPECT_EQ(db->query_int64("SELECT count(*) FROM scenarios").value(), 2);
  EXPECT_EQ(db->query_int64("SELECT count(*) FROM base_models WHERE state = 'online'").value(), 1);
}

// Reopening a file already at the latest version changes neither its schema
// nor its rows.
TEST_F(SchemaTest, FileAtTheLatestVersionIsUntouchedOnReopen) {
  auto snapshot = [this]() {
    auto db = raw("v3.db");
    std::vector<std::string> out;
    out.push_back("user_version=" + std::to_string(schema_version(*db).value()));
    out.push_back("schema_cookie=" + std::to_string(db->query_int64("PRAGMA schema_version").value()));
    for (const char* sql : {"SELECT type || ' ' || name || ' ' || coalesce(sql, '') FROM sqlite_schema ORDER BY name",
                            "SELECT name || ' ' || state || ' ' || dtype || ' ' || updated_at FROM base_models",
                            "SELECT name || ' ' || base_model || ' ' || state || ' ' || updated_at FROM adapters",
                            "SELECT name || ' ' || adapter || ' ' || updated_at FROM scenarios",
                            "SELECT id || ' ' || at || ' ' || to_base FROM base_swaps"}) {
      auto q = db->prepare(sql);
      EXPECT_TRUE(q.is_ok()) << q.status().to_string();
      if (!q.is_ok()) continue;
      while (q->step().value()) out.push_back(q->column_text(0));
    }
    return out;
  };
  {
    auto reg = Registry::open(path("v3.db"));
    ASSERT_TRUE(reg.is_ok()) << reg.status().to_string();
    ASSERT_TRUE((*reg)->upsert_base_model(testing::base_model("v1")).is_ok());
    ASSERT_TRUE((*reg)->upsert_base_model(testing::base_model("v2", BaseModelState::kCandidate)).is_ok());
    ASSERT_TRUE((*reg)->add_adapter(testing::adapter("sql", "v1")).is_ok());
    ASSERT_TRUE((*reg)->add_adapter(testing::adapter("sql", "v2")).is_ok());
    ASSERT_TRUE((*reg)->set_scenario("text2sql", "v2", "sql").is_ok());
    ASSERT_TRUE((*reg)->record_swap(testing::swap_to("v2", "v1")).is_ok());
  }
  const std::vector<std::string> before = snapshot();
  ASSERT_EQ(before[0], "user_version=" + std::to_string(kRegistrySchemaVersion));
  {
    auto reg = Registry::open(path("v3.db"));
    ASSERT_TRUE(reg.is_ok()) << reg.status().to_string();
    EXPECT_EQ((*reg)->resolve_scenario("text2sql", "v2").value(), "sql");
    EXPECT_EQ((*reg)->get_base_model("v2")->state, BaseModelState::kServing);
  }
  {
    auto db = raw("v3.db");
    ASSERT_OK(migrate(*db));  // explicitly, too
  }
  EXPECT_EQ(snapshot(), before);
}

TEST_F(SchemaTest, FileWrittenWithTheFrozenV1SchemaMigrates) {
  {
    auto db = raw("v1-frozen.db");
    ASSERT_OK(db->exec(kFrozenV1));
    ASSERT_OK(db->exec(kV1Rows));
  }
  expect_v1_rows_after_open("v1-frozen.db");
}

// The rules hold in the schema itself, not only in the Registry's checks.
TEST_F(SchemaTest, SchemaEnforcesKeysOnItsOwn) {
  auto db = raw("keys.db");
  ASSERT_OK(migrate(*db));
  ASSERT_OK(db->exec("PRAGMA foreign_keys = ON"));
  ASSERT_OK(db->exec(kV1Rows));
  ASSERT_OK(db->exec("INSERT INTO base_models (name, path, state, created_at, updated_at)"
                     " VALUES ('llama-b', '/models/b', 'candidate', 1, 1)"));
  ASSERT_OK(db->exec("INSERT INTO adapters VALUES ('sql-b', 'llama-b', '/a', 8, 16.0, '[]', '', 0, 'ready', 1, 1)"));
  // The same adapter name on another base is another adapter.
  ASSERT_OK(db->exec("INSERT INTO adapters VALUES ('sql', 'llama-b', '/a', 8, 16.0, '[]', '', 0, 'ready', 1, 1)"));
  // A scenario of base A pointing at an adapter of base B.
  EXPECT_STATUS(db->exec("INSERT INTO scenarios VALUES ('x', 'llama-a', 'sql-b', 1, 1)"),
                StatusCode::kInvalidArgument, "FOREIGN KEY constraint failed");
  // Deleting an adapter a scenario uses.
  EXPECT_STATUS(db->exec("DELETE FROM adapters WHERE name = 'sql'"), StatusCode::kInvalidArgument,
                "FOREIGN KEY constraint failed");
  // An adapter of an unknown base, a duplicate (name, base), a zero rank, a text in an INTEGER column.
  EXPECT_STATUS(db->exec("INSERT INTO adapters VALUES ('z', 'ghost', '/a', 8, 16.0, '[]', '', 0, 'ready', 1, 1)"),
                StatusCode::kInvalidArgument, "FOREIGN KEY");
  EXPECT_STATUS(db->exec("INSERT INTO adapters VALUES ('sql', 'llama-b', '/a', 8, 16.0, '[]', '', 0, 'ready', 1, 1)"),
                StatusCode::kInvalidArgument, "UNIQUE");
  // A base model's sha256 is empty or 64 characters; a swap's forced is an integer.
  EXPECT_STATUS(db->exec("UPDATE base_models SET sha256 = 'abc' WHERE name = 'llama-b'"),
                StatusCode::kInvalidArgument, "CHECK");
  EXPECT_STATUS(db->exec("INSERT INTO base_swaps (at, actor, from_base, to_base, kind, forced, note)"
                         " VALUES (1, 'a', '', 'llama-a', 'promote', 'yes', '')"),
                StatusCode::kInvalidArgument, "cannot store TEXT value in INTEGER column");
  EXPECT_STATUS(db->exec("INSERT INTO adapters VALUES ('z', 'llama-b', '/a', 0, 16.0, '[]', '', 0, 'ready', 1, 1)"),
                StatusCode::kInvalidArgument, "CHECK");
  EXPECT_STATUS(db->exec("INSERT INTO adapters VALUES"
                         " ('z', 'llama-b', '/a', 'eight', 16.0, '[]', '', 0, 'ready', 1, 1)"),
                StatusCode::kInvalidArgument, "cannot store TEXT value in INTEGER column");
}

TEST_F(SchemaTest, NewerSchemaIsRefusedAndLeftUntouched) {
  {
    auto db = raw("future.db");
    ASSERT_OK(migrate(*db));
    ASSERT_OK(db->exec("CREATE TABLE eval_runs (id INTEGER PRIMARY KEY); PRAGMA user_version = 99"));
  }
  auto reg = Registry::open(path("future.db"));
  EXPECT_STATUS(reg.status(), StatusCode::kUnsupported, path("future.db"));
  EXPECT_STATUS(reg.status(), StatusCode::kUnsupported, "schema version 99");
  std::string known = "(";  // built by appends: GCC 12 misreports "(" + std::string&&
  known += std::to_string(kRegistrySchemaVersion);
  known += ")";
  EXPECT_STATUS(reg.status(), StatusCode::kUnsupported, known);
  auto db = raw("future.db");
  EXPECT_EQ(schema_version(*db).value(), 99);
  EXPECT_EQ(count(*db, "table", "eval_runs"), 1);
}

TEST_F(SchemaTest, DowngradeIsRefused) {
  auto db = raw("v2.db");
  ASSERT_OK(migrate(*db));
  EXPECT_STATUS(migrate(*db, 1), StatusCode::kInvalidArgument, "cannot downgrade");
  EXPECT_STATUS(migrate(*db, kRegistrySchemaVersion + 1), StatusCode::kInvalidArgument, "no schema version");
}

// Version 4 with a base, an adapter and a scenario: versions 5 and 6 add the
// training sets and the upgrades, and the rows come through.
TEST_F(SchemaTest, FileStoppedAtVersion4MigratesToTrainingSetsAndUpgrades) {
  {
    auto db = raw("v4.db");
    ASSERT_OK(migrate(*db, 4));
    EXPECT_EQ(count(*db, "table", "scenario_training"), 0);
    EXPECT_EQ(count(*db, "table", "upgrades"), 0);
    ASSERT_OK(db->exec(kV1Rows));
  }
  auto reg = Registry::open(path("v4.db"));
  ASSERT_TRUE(reg.is_ok()) << reg.status().to_string();
  EXPECT_EQ((*reg)->resolve_scenario("text2sql", "llama-a").value(), "sql");
  EXPECT_TRUE((*reg)->list_training_sets()->empty());
  TrainingSetRecord t;
  t.scenario = "text2sql";
  t.path = "/data/sql.jsonl";
  t.sha256 = sha256_hex("rows");
  t.config = R"({"steps": 5})";
  ASSERT_TRUE((*reg)->set_training_set(t).is_ok());
  auto db = raw("v4.db");
  EXPECT_EQ(schema_version(*db).value(), kRegistrySchemaVersion);
  EXPECT_EQ(db->query_int64("SELECT count(*) FROM scenario_training").value(), 1);
  EXPECT_EQ(count(*db, "index", "upgrades_by_candidate"), 1);
  // The schema refuses a training set whose sha256 is not 64 characters, on its own.
  EXPECT_STATUS(db->exec("UPDATE scenario_training SET sha256 = 'abc'"), StatusCode::kInvalidArgument, "CHECK");
}

TEST_F(SchemaTest, AnotherProgramsDatabaseIsRefused) {
  {
    auto db = raw("other-app.db");
    ASSERT_OK(db->exec("PRAGMA application_id = 42; CREATE TABLE t (x)"));
    auto db2 = raw("no-version.db");
    ASSERT_OK(db2->exec("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)"));
  }
  EXPECT_STATUS(Registry::open(path("other-app.db")).status(), StatusCode::kInvalidArgument, "application_id 42");
  EXPECT_STATUS(Registry::open(path("other-app.db")).status(), StatusCode::kInvalidArgument,
                path("other-app.db"));
  EXPECT_STATUS(Registry::open(path("no-version.db")).status(), StatusCode::kInvalidArgument,
                "not a loragate registry");
  auto db = raw("no-version.db");
  EXPECT_EQ(count(*db, "table", "base_models"), 0);  // nothing was added
}

// The first migration of one connection can commit while another is between
// reading version 0 and counting tables; that must not read as another
// program's file. (CI once caught the PostgreSQL twin of this race.)
TEST_F(SchemaTest, ConcurrentFirstOpensMigrateOnce) {
  for (int round = 0; round < 10; ++round) {
    const std::string file = "race-" + std::to_string(round) + ".db";
    std::vector<std::thread> threads;
    std::vector<Status> results(6);
    for (size_t i = 0; i < results.size(); ++i) {
      threads.emplace_back([&, i] { results[i] = Registry::open(path(file)).status(); });
    }
    for (auto& t : threads) t.join();
    for (const Status& st : results) EXPECT_TRUE(st.is_ok()) << st.to_string();
    auto db = raw(file);
    EXPECT_EQ(schema_version(*db).value(), kRegistrySchemaVersion);
  }
}

TEST_F(SchemaTest, TextFileIsRefusedAsCorrupt) {
  {
    std::ofstream out(path("notes.txt"));
    for (int i = 0; i < 100; ++i) out << "this is a plain text file, not a database\n";
  }
  auto reg = Registry::open(path("notes.txt"));
  EXPECT_STATUS(reg.status(), StatusCode::kCorrupt, path("notes.txt"));
  EXPECT_STATUS(reg.status(), StatusCode::kCorrupt, "not a database");
  EXPECT_STATUS(reg.status(), StatusCode::kCorrupt, "cannot open registry");
  {
    std::ofstream out(path("short.txt"));
    out << "hi\n";
  }
  EXPECT_STATUS(Registry::open(path("short.txt")).status(), StatusCode::kCorrupt, path("short.txt"));
}

TEST_F(SchemaTest, EmptyFileBecomesARegistry) {
  std::ofstream(path("empty.db")).close();
  auto reg = Registry::open(path("empty.db"));
  ASSERT_TRUE(reg.is_ok()) << reg.status().to_string();
  EXPECT_TRUE((*reg)->list_adapters()->empty());
}

}  // namespace
}  // namespace loragate
