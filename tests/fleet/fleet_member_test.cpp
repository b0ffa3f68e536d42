// FleetMember on real bases (../shared) and one real SQLite registry file
// shared by two "replicas" in this process, each with its own connection and
// BaseSet: adapters, candidate bases and the serving base converge, a
// replica's own load never overwrites the fleet's record, a desired base is
// followed and released, a rollout whose coordinator died is ended, and the
// background thread picks a change up without being asked.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "bases/base_set.h"
#include "fleet/fleet_member.h"
#include "registry/registry.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

using Clock = std::chrono::steady_clock;

std::string online_dir() { return testing::shared_dir() + "/models/stories260K"; }
std::string good_dir() { return testing::shared_dir() + "/eval/bases/candidate-good"; }
std::string mia_dir() { return testing::shared_dir() + "/eval/adapters/online/mia"; }

BaseSetOptions small_options() {
  BaseSetOptions o;
  o.engine.max_loras = 2;
  o.engine.kv_cache_bytes = 8ll << 20;
  return o;
}

// One replica: its registry connection, bases and fleet membership.
struct Replica {
  Replica(const std::string& db, const std::string& url) {
    auto opened = Registry::open(db);
    EXPECT_TRUE(opened.is_ok()) << opened.status().to_string();
    registry = std::move(opened).value();
    bases = std::make_unique<BaseSet>(small_options(), registry.get());
    FleetOptions o;
    o.url = url;
    o.heartbeat = std::chrono::milliseconds(200);
    o.lost_after = std::chrono::milliseconds(1000);
    member = std::make_unique<FleetMember>(o, registry.get(), bases.get(), [this] { ++route_reloads; });
  }
  bool has_adapter(const std::string& base, const std::string& name) {
    Result<std::shared_ptr<ServingBase>> b = bases->find(base);
    return b.is_ok() && (*b)->adapters()->contains(name);
  }
  std::string serving() { return bases->serving() ? bases->serving()->name() : ""; }

  std::unique_ptr<Registry> registry;
  std::unique_ptr<BaseSet> bases;
  std::unique_ptr<FleetMember> member;
  int route_reloads = 0;
};

class FleetMemberTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("eval/bases/candidate-good/model.safetensors");
    dir_ = testing::make_temp_dir("lg-fleet");
    a_ = std::make_unique<Replica>(dir_ + "/registry.db", "http://127.0.0.1:1");
    b_ = std::make_unique<Replica>(dir_ + "/registry.db", "http://127.0.0.1:2");
    ASSERT_TRUE(a_->bases->start_serving({"online", online_dir(), WeightType::kF32}, "test").is_ok());
    ASSERT_TRUE(b_->bases->start_serving({"online", online_dir(), WeightType::kF32}, "test").is_ok());
    ASSERT_TRUE(a_->member->heartbeat_now().is_ok());
    ASSERT_TRUE(b_->member->heartbeat_now().is_ok());
  }
  void TearDown() override {
    b_.reset();
    a_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // Reconciles `r` until `done` holds (a base loads in the background), at most 60 s.
  static bool reconcile_until(Replica& r, const std::function<bool()>& done) {
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < deadline) {
      Status s = r.member->reconcile_now();
      EXPECT_TRUE(s.is_ok()) << s.to_string();
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  // Registers mia on `base` of replica `r`, in registry and cache, as the admin API does.
  static void register_mia(Replica& r) {
    ASSERT_TRUE(r.bases->find("online").value()->adapters()->add("mia", mia_dir()).is_ok());
    AdapterRecord mia{"mia", "online", mia_dir(), 8, 16, {"q_proj"}, "", 0};
    ASSERT_TRUE(r.registry->add_adapter(mia).is_ok());
  }

  std::string dir_;
  std::unique_ptr<Replica> a_, b_;
};

TEST_F(FleetMemberTest, AdaptersAndCandidatesReachTheOtherReplicaWithoutRewritingTheFleetsRecord) {
  register_mia(*a_);
  ASSERT_FALSE(b_->has_adapter("online", "mia"));
  ASSERT_TRUE(b_->member->reconcile_now().is_ok());
  EXPECT_TRUE(b_->has_adapter("online", "mia"));
  EXPECT_GE(b_->route_reloads, 1);

  ASSERT_TRUE(a_->bases->add({"good", good_dir(), WeightType::kF32}).is_ok());
  ASSERT_TRUE(a_->bases->wait_loaded("good", Clock::now() + std::chrono::seconds(60)));
  ASSERT_TRUE(reconcile_until(*b_, [&] { return b_->bases->find("good").is_ok(); }));
  // B's own load recorded nothing: the fleet's record is A's.
  EXPECT_EQ(b_->registry->get_base_model("good")->state, BaseModelState::kCandidate);
  EXPECT_EQ(b_->registry->get_base_model("online")->state, BaseModelState::kServing);
  EXPECT_EQ(b_->serving(), "online");

  // An adapter that leaves the registry leaves B's cache; a base retired there is unloaded.
  ASSERT_TRUE(a_->registry->remove_adapter("mia", "online").is_ok());
  ASSERT_TRUE(a_->bases->remove("good").is_ok());
  ASSERT_TRUE(b_->member->reconcile_now().is_ok());
  EXPECT_FALSE(b_->has_adapter("online", "mia"));
  EXPECT_FALSE(b_->bases->find("good").is_ok());
}

TEST_F(FleetMemberTest, ADesiredBaseIsFollowedAndReleasedAndAPromoteElsewhereIsFollowed) {
  ASSERT_TRUE(a_->bases->add({"good", good_dir(), WeightType::kF32}).is_ok());
  ASSERT_TRUE(a_->bases->wait_loaded("good", Clock::now() + std::chrono::seconds(60)));
  ASSERT_TRUE(reconcile_until(*b_, [&] { return b_->bases->find("good").is_ok(); }));

  ASSERT_TRUE(a_->registry->set_replica_desired_base("http://127.0.0.1:2", "good").is_ok());
  ASSERT_TRUE(b_->member->reconcile_now().is_ok());
  EXPECT_EQ(b_->serving(), "good");
  EXPECT_EQ(a_->serving(), "online");
  EXPECT_EQ(a_->registry->get_base_model("online")->state, BaseModelState::kServing) << "a follow records nothing";
  ASSERT_TRUE(b_->member->heartbeat_now().is_ok());
  auto replicas = a_->registry->list_replicas();
  ASSERT_TRUE(replicas.is_ok());
  ASSERT_EQ(replicas->size(), 2u);
  EXPECT_EQ((*replicas)[1].serving, "good");

  ASSERT_TRUE(a_->registry->set_replica_desired_base("http://127.0.0.1:2", "").is_ok());
  ASSERT_TRUE(b_->member->reconcile_now().is_ok());
  EXPECT_EQ(b_->serving(), "online");

  // A promote recorded by A: B follows the fleet's serving base.
  ASSERT_TRUE(a_->bases->promote("good", /*force=*/true, "test").is_ok());
  ASSERT_TRUE(b_->member->reconcile_now().is_ok());
  EXPECT_EQ(b_->serving(), "good");
  auto target = b_->member->target_base();
  ASSERT_TRUE(target.is_ok());
  EXPECT_EQ(*target, "good");
}

TEST_F(FleetMemberTest, ARolloutWhoseCoordinatorIsGoneIsEndedAndEveryReplicaReleased) {
  ASSERT_TRUE(a_->bases->add({"good", good_dir(), WeightType::kF32}).is_ok());
  ASSERT_TRUE(a_->bases->wait_loaded("good", Clock::now() + std::chrono::seconds(60)));
  ASSERT_TRUE(reconcile_until(*b_, [&] { return b_->bases->find("good").is_ok(); }));
  RolloutRecord r;
  r.from_base = "online";
  r.to_base = "good";
  r.coordinator = "http://127.0.0.1:3";  // no such replica: it died before its first heartbeat was read
  auto stored = a_->registry->add_rollout(r);
  ASSERT_TRUE(stored.is_ok());
  ASSERT_TRUE(a_->registry->set_replica_desired_base("http://127.0.0.1:2", "good").is_ok());
  ASSERT_TRUE(b_->member->reconcile_now().is_ok());
  auto ended = b_->registry->get_rollout(stored->id);
  ASSERT_TRUE(ended.is_ok());
  EXPECT_EQ(ended->state, "failed");
  EXPECT_NE(ended->error.find("http://127.0.0.1:3"), std::string::npos) << ended->error;
  ASSERT_TRUE(b_->member->reconcile_now().is_ok());
  EXPECT_EQ(b_->serving(), "online");
  auto released = b_->registry->list_replicas();
  ASSERT_TRUE(released.is_ok());
  for (const ReplicaRecord& rep : *released) EXPECT_EQ(rep.desired_base, "");

  // A live coordinator's rollout is left alone.
  r.coordinator = "http://127.0.0.1:1";
  ASSERT_TRUE(a_->member->heartbeat_now().is_ok());
  auto live = a_->registry->add_rollout(r);
  ASSERT_TRUE(live.is_ok());
  ASSERT_TRUE(b_->member->reconcile_now().is_ok());
  EXPECT_EQ(b_->registry->get_rollout(live->id)->state, "rolling");
}

TEST_F(FleetMemberTest, TheBackgroundThreadPicksAChangeUpWithinASecond) {
  b_->member->start();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // its first pass
  const auto t0 = Clock::now();
  register_mia(*a_);
  while (!b_->has_adapter("online", "mia") && Clock::now() - t0 < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto took = Clock::now() - t0;
  b_->member->stop();
  EXPECT_TRUE(b_->has_adapter("online", "mia"));
  EXPECT_LT(took, std::chrono::seconds(1));
  // Its heartbeats are there, and fresh.
  auto replicas = a_->registry->list_replicas();
  ASSERT_TRUE(replicas.is_ok());
  for (const ReplicaRecord& rep : *replicas) {
    if (rep.url == "http://127.0.0.1:2") {
      EXPECT_LT(fleet_now_ms() - rep.last_seen, 1000);
    }
  }
}

}  // namespace
}  // namespace loragate
