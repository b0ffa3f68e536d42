// Schema migrations on real files: a fresh file, a file left at version 1
// (by the migration code and by a frozen copy of the v1 DDL), files from the
// future, other programs' databases and files that are not databases.
#include "registry/schema.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

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

constexpr const char* kV1Rows = R"sql(
INSERT INTO base_models VALUES ('llama-a', '/models/a', 'online', 100, 100);
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
    auto a = (*reg)->get_adapter("sql");
    ASSERT_TRUE(a.is_ok()) << a.status().to_string();
    EXPECT_EQ(a->base_model, "llama-a");
    EXPECT_EQ(a->created_at, 200);
    EXPECT_EQ(a->target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
    EXPECT_EQ((*reg)->resolve_scenario("text2sql", "llama-a").value(), "sql");
    EXPECT_EQ((*reg)->get_base_model("llama-a")->created_at, 100);
    // And it still enforces the rules after the migration.
    EXPECT_EQ((*reg)->remove_adapter("sql").code(), StatusCode::kInvalidArgument);
    reg->reset();
    auto db = raw(file);
    EXPECT_EQ(schema_version(*db).value(), kRegistrySchemaVersion);
    EXPECT_EQ(count(*db, "index", "adapters_by_base_model"), 1);
    EXPECT_EQ(count(*db, "index", "scenarios_by_adapter"), 1);
  }
};

TEST_F(SchemaTest, FreshFileGetsTheLatestSchema) {
  auto db = raw("fresh.db");
  EXPECT_EQ(schema_version(*db).value(), 0);
  ASSERT_OK(migrate(*db));
  EXPECT_EQ(schema_version(*db).value(), kRegistrySchemaVersion);
  EXPECT_EQ(db->query_int64("PRAGMA application_id").value(), kRegistryApplicationId);
  for (const char* table : {"base_models", "adapters", "scenarios"}) EXPECT_EQ(count(*db, "table", table), 1) << table;
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
  ASSERT_OK(db->exec("INSERT INTO base_models VALUES ('llama-b', '/models/b', 'candidate', 1, 1)"));
  ASSERT_OK(db->exec("INSERT INTO adapters VALUES ('sql-b', 'llama-b', '/a', 8, 16.0, '[]', '', 0, 'ready', 1, 1)"));
  // A scenario of base A pointing at an adapter of base B.
  EXPECT_STATUS(db->exec("INSERT INTO scenarios VALUES ('x', 'llama-a', 'sql-b', 1, 1)"),
                StatusCode::kInvalidArgument, "FOREIGN KEY constraint failed");
  // Deleting an adapter a scenario uses.
  EXPECT_STATUS(db->exec("DELETE FROM adapters WHERE name = 'sql'"), StatusCode::kInvalidArgument,
                "FOREIGN KEY constraint failed");
  // An adapter of an unknown base, a duplicate name, a zero rank, a text in an INTEGER column.
  EXPECT_STATUS(db->exec("INSERT INTO adapters VALUES ('z', 'ghost', '/a', 8, 16.0, '[]', '', 0, 'ready', 1, 1)"),
                StatusCode::kInvalidArgument, "FOREIGN KEY");
  EXPECT_STATUS(db->exec("INSERT INTO adapters VALUES ('sql', 'llama-b', '/a', 8, 16.0, '[]', '', 0, 'ready', 1, 1)"),
                StatusCode::kInvalidArgument, "UNIQUE");
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
