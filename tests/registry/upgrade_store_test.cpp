// The upgrades' record: added, rewritten step by step, listed newest first,
// and, after a restart, every upgrade left running shows as interrupted while
// finished ones keep their state.
#include "registry/upgrade_store.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/registry/pg_server.h"
#include "tests/registry/registry_fixtures.h"

namespace loragate::testing {
namespace {

class UpgradeStoreTest : public OnBothBackends<RegistryLocationTest> {
 protected:
  std::unique_ptr<UpgradeStore> open_store() {
    auto store = UpgradeStore::open(location("registry.db"));
    EXPECT_TRUE(store.is_ok()) << store.status().to_string();
    return store.is_ok() ? std::move(store).value() : nullptr;
  }
  static UpgradeRecord upgrade_of(const std::string& candidate) {
    UpgradeRecord r;
    r.candidate = candidate;
    r.candidate_path = "/models/" + candidate;
    r.online_base = "online";
    r.promote = true;
    return r;
  }
};

TEST_P(UpgradeStoreTest, StoresEveryStepAndListsNewestFirst) {
  auto store = open_store();
  ASSERT_NE(store, nullptr);
  auto id = store->add(upgrade_of("good"));
  ASSERT_TRUE(id.is_ok()) << id.status().to_string();
  auto second = store->add(upgrade_of("bad"));
  ASSERT_TRUE(second.is_ok());
  EXPECT_GT(*second, *id);

  UpgradeRecord r = store->get(*id).value();
  EXPECT_EQ(r.state, "queued");
  EXPECT_TRUE(r.promote);
  EXPECT_FALSE(r.skip_untrained);
  EXPECT_GT(r.started_at, 0);
  r.state = "passed";
  r.steps = R"([{"scenario": "mia", "state": "trained"}])";
  r.verdict = "pass";
  r.evaluation = 7;
  r.report = "/srv/trained/good/upgrade-1.json";
  ASSERT_OK(store->update(r));
  const UpgradeRecord read = store->get(*id).value();
  EXPECT_EQ(read.state, "passed");
  EXPECT_EQ(read.verdict, "pass");
  EXPECT_EQ(read.evaluation, 7);
  EXPECT_EQ(read.report, "/srv/trained/good/upgrade-1.json");
  EXPECT_EQ(nlohmann::json::parse(read.steps)[0]["scenario"], "mia");

  auto all = store->list();
  ASSERT_TRUE(all.is_ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].candidate, "bad");
  EXPECT_EQ((*all)[1].candidate, "good");

  r.state = "sleeping";
  EXPECT_STATUS(store->update(r), StatusCode::kInvalidArgument, "unknown state 'sleeping'");
  r.state = "failed";
  r.steps = "\"steps\"";
  EXPECT_STATUS(store->update(r), StatusCode::kInvalidArgument, "not a JSON object or array");
  r.steps = "[]";
  r.id = 999;
  EXPECT_STATUS(store->update(r), StatusCode::kNotFound, "upgrade 999");
  EXPECT_STATUS(store->get(999).status(), StatusCode::kNotFound, "upgrade 999");
}

TEST_P(UpgradeStoreTest, ARestartShowsRunningUpgradesInterrupted) {
  int64_t running = 0, done = 0;
  {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    UpgradeRecord r = upgrade_of("good");
    r.state = "training";
    running = store->add(r).value();
    r.state = "promoted";
    done = store->add(r).value();
  }
  auto store = open_store();  // as a restarted server does
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->mark_interrupted().value(), 1);
  const UpgradeRecord was_running = store->get(running).value();
  EXPECT_EQ(was_running.state, "interrupted");
  EXPECT_NE(was_running.error.find("resume"), std::string::npos) << was_running.error;
  EXPECT_EQ(store->get(done).value().state, "promoted");
  EXPECT_EQ(store->mark_interrupted().value(), 0);
}


INSTANTIATE_TEST_SUITE_P(Backends, UpgradeStoreTest, kBothBackends, backend_name);

}  // namespace
}  // namespace loragate::testing
