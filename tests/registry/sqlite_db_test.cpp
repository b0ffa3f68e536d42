// SqliteDb, Statement and Transaction: binding and reading every type, error
// statuses that carry SQLite's text and the SQL, and rollback on scope exit.
#include "registry/sqlite_db.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/registry/registry_fixtures.h"

namespace loragate {
namespace {

class SqliteDbTest : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    auto db = SqliteDb::open(path("t.db"));
    ASSERT_TRUE(db.is_ok()) << db.status().to_string();
    db_ = std::move(db).value();
    ASSERT_OK(db_->exec("CREATE TABLE t (i INTEGER, r REAL, s TEXT UNIQUE)"));
  }
  int64_t rows() { return db_->query_int64("SELECT count(*) FROM t").value(); }

  std::unique_ptr<SqliteDb> db_;
};

TEST_F(SqliteDbTest, BindStepAndReadColumns) {
  auto insert = db_->prepare("INSERT INTO t VALUES (?1, ?2, ?3)");
  ASSERT_TRUE(insert.is_ok()) << insert.status().to_string();
  insert->bind(1, int64_t{1} << 40).bind(2, 2.5).bind(3, std::string("with\0nul", 8));
  ASSERT_OK(insert->run());
  EXPECT_EQ(db_->changes(), 1);
  insert->reset();
  insert->bind(1, int64_t{-7}).bind_null(2).bind(3, "second");
  ASSERT_OK(insert->run());

  auto q = db_->prepare("SELECT i, r, s FROM t ORDER BY i");
  ASSERT_TRUE(q.is_ok());
  ASSERT_TRUE(q->step().value());
  EXPECT_EQ(q->column_int64(0), -7);
  EXPECT_TRUE(q->column_is_null(1));
  EXPECT_EQ(q->column_double(1), 0.0);
  EXPECT_EQ(q->column_text(2), "second");
  ASSERT_TRUE(q->step().value());
  EXPECT_EQ(q->column_int64(0), int64_t{1} << 40);
  EXPECT_EQ(q->column_double(1), 2.5);
  EXPECT_EQ(q->column_text(2), std::string("with\0nul", 8));
  EXPECT_FALSE(q->step().value());
}

TEST_F(SqliteDbTest, ErrorsCarrySqliteTextAndTheSql) {
  auto bad = db_->prepare("SELEKT nonsense");
  EXPECT_STATUS(bad.status(), StatusCode::kInternal, "syntax error");
  EXPECT_STATUS(bad.status(), StatusCode::kInternal, "SELEKT nonsense");
  EXPECT_STATUS(bad.status(), StatusCode::kInternal, path("t.db"));

  ASSERT_OK(db_->exec("INSERT INTO t VALUES (1, 1, 'dup')"));
  auto insert = db_->prepare("INSERT INTO t VALUES (2, 2, ?1)");
  ASSERT_TRUE(insert.is_ok());
  insert->bind(1, "dup");
  const Status st = insert->run();
  EXPECT_STATUS(st, StatusCode::kInvalidArgument, "UNIQUE constraint failed: t.s");
  EXPECT_STATUS(st, StatusCode::kInvalidArgument, "INSERT INTO t VALUES (2, 2, ?1)");

  EXPECT_STATUS(db_->exec("INSERT INTO missing VALUES (1)"), StatusCode::kInternal, "no such table: missing");
}

TEST_F(SqliteDbTest, BindErrorIsReportedByStep) {
  auto insert = db_->prepare("INSERT INTO t VALUES (?1, 0, 'x')");
  ASSERT_TRUE(insert.is_ok());
  insert->bind(5, int64_t{1});  // there is no ?5
  EXPECT_STATUS(insert->run(), StatusCode::kInvalidArgument, "binding parameter 5");
  EXPECT_EQ(rows(), 0);
  insert->reset();  // clears the remembered error
  insert->bind(1, int64_t{1});
  ASSERT_OK(insert->run());
  EXPECT_EQ(rows(), 1);
}

TEST_F(SqliteDbTest, TransactionRollsBackUnlessCommitted) {
  {
    auto txn = Transaction::begin(*db_);
    ASSERT_TRUE(txn.is_ok()) << txn.status().to_string();
    EXPECT_TRUE(db_->in_transaction());
    ASSERT_OK(db_->exec("INSERT INTO t VALUES (1, 1, 'a')"));
  }  // no commit
  EXPECT_FALSE(db_->in_transaction());
  EXPECT_EQ(rows(), 0);
  {
    auto txn = Transaction::begin(*db_);
    ASSERT_TRUE(txn.is_ok());
    ASSERT_OK(db_->exec("INSERT INTO t VALUES (1, 1, 'a')"));
    ASSERT_OK(txn->commit());
    EXPECT_EQ(txn->commit().code(), StatusCode::kInternal);  // only once
  }
  EXPECT_EQ(rows(), 1);
}

TEST_F(SqliteDbTest, SecondWriterWaitsThenReportsBusy) {
  auto other = SqliteDb::open(path("t.db"));
  ASSERT_TRUE(other.is_ok());
  ASSERT_OK((*other)->exec("PRAGMA busy_timeout = 50"));
  auto held = Transaction::begin(*db_);
  ASSERT_TRUE(held.is_ok());
  auto blocked = Transaction::begin(**other);
  EXPECT_STATUS(blocked.status(), StatusCode::kResourceExhausted, "locked");
}

TEST_F(SqliteDbTest, StatementsMove) {
  auto q = db_->prepare("SELECT 42");
  ASSERT_TRUE(q.is_ok());
  Statement moved = std::move(q).value();
  ASSERT_TRUE(moved.step().value());
  EXPECT_EQ(moved.column_int64(0), 42);
  EXPECT_EQ(moved.sql(), "SELECT 42");
  auto other = db_->prepare("SELECT 7");
  moved = std::move(other).value();
  ASSERT_TRUE(moved.step().value());
  EXPECT_EQ(moved.column_int64(0), 7);
}

}  // namespace
}  // namespace loragate
