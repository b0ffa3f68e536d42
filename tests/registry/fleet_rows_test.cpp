// The fleet's rows in the registry: replicas' heartbeats (the desired base a
// rollout set survives them), rollouts, and wait_for_change waking on another
// connection's commit and timing out when nothing happens.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "registry/registry.h"
#include "tests/registry/pg_server.h"
#include "tests/registry/registry_fixtures.h"

namespace loragate {
namespace {

using testing::base_model;

class FleetRowsTest : public testing::OnBothBackends<testing::RegistryLocationTest> {
 protected:
  std::unique_ptr<Registry> open_registry() {
    auto reg = Registry::open(location("registry.db"));
    EXPECT_TRUE(reg.is_ok()) << reg.status().to_string();
    return reg.is_ok() ? std::move(reg).value() : nullptr;
  }
};

ReplicaRecord replica(const std::string& url, const std::string& serving) {
  ReplicaRecord r;
  r.url = url;
  r.serving = serving;
  r.bases = R"([{"name": ")" + serving + R"(", "state": "serving"}])";
  r.adapters = R"([{"name": "mia", "base": ")" + serving + R"("}])";
  r.started_at = 1700000000;
  return r;
}

TEST_P(FleetRowsTest, HeartbeatsKeepTheDesiredBaseARolloutSet) {
  auto reg = open_registry();
  ASSERT_NE(reg, nullptr);
  auto first = reg->upsert_replica(replica("http://127.0.0.1:9001", "online"));
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_GT(first->last_seen, int64_t{1700000000} * 1000);
  EXPECT_EQ(first->desired_base, "");
  ASSERT_TRUE(reg->upsert_replica(replica("http://127.0.0.1:9000", "online")).is_ok());

  ASSERT_OK(reg->set_replica_desired_base("http://127.0.0.1:9001", "candidate-good"));
  ReplicaRecord again = replica("http://127.0.0.1:9001", "candidate-good");
  again.started_at = 1700000100;  // restarted
  auto stored = reg->upsert_replica(again);
  ASSERT_TRUE(stored.is_ok());
  EXPECT_EQ(stored->desired_base, "candidate-good");
  EXPECT_EQ(stored->serving, "candidate-good");
  EXPECT_EQ(stored->started_at, 1700000100);

  auto all = reg->list_replicas();
  ASSERT_TRUE(all.is_ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].url, "http://127.0.0.1:9000");  // by url
  EXPECT_EQ((*all)[1].desired_base, "candidate-good");

  ASSERT_OK(reg->set_replica_desired_base("http://127.0.0.1:9001", ""));
  ASSERT_OK(reg->remove_replica("http://127.0.0.1:9000"));
  EXPECT_STATUS(reg->remove_replica("http://127.0.0.1:9000"), StatusCode::kNotFound, "http://127.0.0.1:9000");
  EXPECT_STATUS(reg->set_replica_desired_base("http://nowhere:1", "x"), StatusCode::kNotFound, "nowhere");
}

TEST_P(FleetRowsTest, MalformedReplicasAndRolloutsAreRefusedNamingTheField) {
  auto reg = open_registry();
  ASSERT_NE(reg, nullptr);
  ReplicaRecord bad = replica("http://127.0.0.1:9001", "online");
  bad.adapters = "{}";
  EXPECT_STATUS(reg->upsert_replica(bad).status(), StatusCode::kInvalidArgument, "adapters");
  bad = replica("http://a b", "online");
  EXPECT_STATUS(reg->upsert_replica(bad).status(), StatusCode::kInvalidArgument, "space");
  RolloutRecord r;
  r.to_base = "cand";
  r.state = "sideways";
  EXPECT_STATUS(reg->add_rollout(r).status(), StatusCode::kInvalidArgument, "sideways");
  r.state = "rolling";
  r.kind = "upgrade";
  EXPECT_STATUS(reg->add_rollout(r).status(), StatusCode::kInvalidArgument, "upgrade");
}

TEST_P(FleetRowsTest, RolloutsAreStoredUpdatedAndListedNewestFirst) {
  auto reg = open_registry();
  ASSERT_NE(reg, nullptr);
  RolloutRecord r;
  r.from_base = "online";
  r.to_base = "candidate-good";
  r.coordinator = "http://127.0.0.1:9000";
  auto first = reg->add_rollout(r);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_GT(first->id, 0);
  EXPECT_EQ(first->state, "rolling");
  r.to_base = "candidate-bad";
  auto second = reg->add_rollout(r);
  ASSERT_TRUE(second.is_ok());
  EXPECT_GT(second->id, first->id);

  RolloutRecord done = *second;
  done.state = "rolled_back";
  done.steps = R"([{"replica": "http://127.0.0.1:9000", "check": "smoke failed"}])";
  done.error = "replica http://127.0.0.1:9000: smoke request for 'mia' answered by 'online'";
  ASSERT_OK(reg->update_rollout(done));
  auto got = reg->get_rollout(second->id);
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ(got->state, "rolled_back");
  EXPECT_EQ(got->steps, done.steps);
  EXPECT_EQ(got->error, done.error);

  auto list = reg->list_rollouts(10);
  ASSERT_TRUE(list.is_ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].id, second->id);
  EXPECT_STATUS(reg->get_rollout(9999).status(), StatusCode::kNotFound, "9999");
  done.id = 9999;
  EXPECT_STATUS(reg->update_rollout(done), StatusCode::kNotFound, "9999");
  EXPECT_STATUS(reg->list_rollouts(0).status(), StatusCode::kInvalidArgument, "limit");
}

TEST_P(FleetRowsTest, WaitForChangeWakesOnAnotherConnectionsWriteAndTimesOutOtherwise) {
  auto watcher = open_registry();
  auto writer = open_registry();
  ASSERT_NE(watcher, nullptr);
  ASSERT_NE(writer, nullptr);
  // Settle: whatever happened before (migrations) is not a change to report later.
  ASSERT_TRUE(watcher->wait_for_change(0).is_ok());
  (void)watcher->wait_for_change(0);
  auto quiet = watcher->wait_for_change(300);
  ASSERT_TRUE(quiet.is_ok());
  EXPECT_FALSE(*quiet);

  std::thread write([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_TRUE(writer->upsert_base_model(base_model("online")).is_ok());
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto woke = watcher->wait_for_change(5000);
  const auto waited = std::chrono::steady_clock::now() - t0;
  write.join();
  ASSERT_TRUE(woke.is_ok()) << woke.status().to_string();
  EXPECT_TRUE(*woke);
  EXPECT_LT(waited, std::chrono::seconds(2));

  // Its own writes count too.
  ASSERT_TRUE(watcher->upsert_base_model(base_model("candidate", BaseModelState::kCandidate)).is_ok());
  auto own = watcher->wait_for_change(1000);
  ASSERT_TRUE(own.is_ok());
  EXPECT_TRUE(*own);
}

INSTANTIATE_TEST_SUITE_P(Backends, FleetRowsTest, testing::kBothBackends, testing::backend_name);

}  // namespace
}  // namespace loragate
