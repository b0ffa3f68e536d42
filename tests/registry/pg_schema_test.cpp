// The registry on PostgreSQL only: a fresh database is migrated to the
// latest schema, a newer version or another program's tables are refused,
// a server that is not there is an io_error naming it (never the password),
// and a connection the server dropped is made again by the next call.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "registry/evaluation_store.h"
#include "registry/pg_connection.h"
#include "registry/pg_schema.h"
#include "registry/registry.h"
#include "registry/upgrade_store.h"
#include "tests/registry/pg_server.h"
#include "tests/registry/registry_fixtures.h"

namespace loragate::testing {
namespace {

class PgSchemaTest : public RegistryLocationTest {
 protected:
  void SetUp() override {
    use_backend(Backend::kPostgres);
    if (IsSkipped() || HasFatalFailure()) return;
    RegistryLocationTest::SetUp();
  }
  std::unique_ptr<PgConnection> raw(const std::string& url) {
    auto db = PgConnection::open(url);
    EXPECT_TRUE(db.is_ok()) << db.status().to_string();
    return db.is_ok() ? std::move(db).value() : nullptr;
  }
};

TEST_F(PgSchemaTest, AFreshDatabaseGetsTheLatestSchema) {
  const std::string url = location("fresh");
  {
    auto db = raw(url);
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(pg_schema_version(*db).value(), 0);
  }
  auto reg = Registry::open(url);
  ASSERT_TRUE(reg.is_ok()) << reg.status().to_string();
  auto db = raw(url);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(pg_schema_version(*db).value(), kRegistrySchemaVersion);
  for (const char* table : {"base_models", "adapters", "scenarios", "base_swaps", "evaluations", "scenario_training",
                            "upgrades", "replicas", "rollouts"}) {
    EXPECT_EQ(db->query_int64(std::string("SELECT count(*) FROM pg_tables WHERE tablename = '") + table + "'").value(),
              1)
        << table;
  }
  for (const char* index : {"adapters_by_base_model", "scenarios_by_adapter", "scenarios_by_base_model",
                            "evaluations_by_candidate", "upgrades_by_candidate"}) {
    EXPECT_EQ(db->query_int64(std::string("SELECT count(*) FROM pg_indexes WHERE indexname = '") + index + "'").value(),
              1)
        << index;
  }
  // The keys hold in the database too, not only in the code.
  EXPECT_EQ(db->exec("INSERT INTO scenarios VALUES ('s', 'nobase', 'a', 1, 1)").code(), StatusCode::kInvalidArgument);
  // Opening again (and the stores) migrates nothing and keeps the rows.
  ASSERT_TRUE((*reg)->upsert_base_model(base_model("b")).is_ok());
  ASSERT_TRUE(EvaluationStore::open(url).is_ok());
  ASSERT_TRUE(UpgradeStore::open(url).is_ok());
  auto again = Registry::open(url);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ((*again)->list_base_models()->size(), 1u);
}

TEST_F(PgSchemaTest, ANewerVersionIsRefusedAsUnsupported) {
  const std::string url = location("newer");
  ASSERT_TRUE(Registry::open(url).is_ok());
  auto db = raw(url);
  ASSERT_NE(db, nullptr);
  ASSERT_OK(db->exec("UPDATE loragate_schema SET version = " + std::to_string(kRegistrySchemaVersion + 1)));
  EXPECT_STATUS(Registry::open(url).status(), StatusCode::kUnsupported, "newer than this build");
  EXPECT_STATUS(EvaluationStore::open(url).status(), StatusCode::kUnsupported, db->path());
  EXPECT_STATUS(UpgradeStore::open(url).status(), StatusCode::kUnsupported, "schema version");
  EXPECT_EQ(pg_schema_version(*db).value(), kRegistrySchemaVersion + 1);  // not written to
}

TEST_F(PgSchemaTest, AnotherProgramsDatabaseIsRefused) {
  const std::string url = location("foreign");
  auto db = raw(url);
  ASSERT_NE(db, nullptr);
  ASSERT_OK(db->exec("CREATE TABLE orders (id BIGINT)"));
  EXPECT_STATUS(Registry::open(url).status(), StatusCode::kInvalidArgument, "not a loragate registry");
}

TEST_F(PgSchemaTest, ConcurrentFirstOpensMigrateOnce) {
  const std::string url = location("race");
  std::vector<std::thread> threads;
  std::vector<Status> results(4);
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = Registry::open(url).status(); });
  }
  for (auto& t : threads) t.join();
  for (const Status& st : results) EXPECT_TRUE(st.is_ok()) << st.to_string();
  auto db = raw(url);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(pg_schema_version(*db).value(), kRegistrySchemaVersion);
}

TEST(PgUnreachableTest, AnAbsentServerIsUnavailableNamingItButNotThePassword) {
  // Port 1 on loopback: nothing listens there.
  const std::string url = "postgresql://loragate:s3cret-pw@127.0.0.1:1/fleet";
  auto reg = Registry::open(url);
  ASSERT_FALSE(reg.is_ok());
  EXPECT_EQ(reg.status().code(), StatusCode::kUnavailable) << reg.status().to_string();
  EXPECT_NE(reg.status().message().find("127.0.0.1:1/fleet"), std::string::npos) << reg.status().to_string();
  EXPECT_EQ(reg.status().message().find("s3cret"), std::string::npos) << reg.status().to_string();
  EXPECT_EQ(EvaluationStore::open(url).status().code(), StatusCode::kUnavailable);
}

TEST_F(PgSchemaTest, ADroppedConnectionFailsOneCallAndTheNextReconnects) {
  const std::string url = location("dropped");
  auto reg = Registry::open(url);
  ASSERT_TRUE(reg.is_ok()) << reg.status().to_string();
  ASSERT_TRUE((*reg)->upsert_base_model(base_model("b")).is_ok());
  ASSERT_TRUE((*reg)->wait_for_change(0).is_ok());  // the listener connects
  auto admin = raw(url);
  ASSERT_NE(admin, nullptr);
  // The server ends every other session on this database (as a restart would).
  ASSERT_TRUE(admin->query_int64("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                                 " WHERE datname = current_database() AND pid <> pg_backend_pid()")
                  .is_ok());
  auto failed = (*reg)->list_base_models();
  ASSERT_FALSE(failed.is_ok());
  EXPECT_TRUE(failed.status().code() == StatusCode::kUnavailable) << failed.status().to_string();
  EXPECT_NE(failed.status().message().find("/lg_test_"), std::string::npos) << failed.status().to_string();
  auto recovered = (*reg)->list_base_models();
  ASSERT_TRUE(recovered.is_ok()) << recovered.status().to_string();
  EXPECT_EQ(recovered->size(), 1u);
  // The listener notices its loss, connects again and reports a possible change.
  auto woke = (*reg)->wait_for_change(2000);
  ASSERT_TRUE(woke.is_ok()) << woke.status().to_string();
  EXPECT_TRUE(*woke);
  ASSERT_TRUE((*reg)->upsert_base_model(base_model("c", BaseModelState::kCandidate)).is_ok());
  auto after = (*reg)->wait_for_change(2000);
  ASSERT_TRUE(after.is_ok());
  EXPECT_TRUE(*after);
}

}  // namespace
}  // namespace loragate::testing
