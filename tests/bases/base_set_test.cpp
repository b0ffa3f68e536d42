// BaseSet on real files: the serving base and a candidate (../shared/eval),
// background loads, the memory budget, promote/rollback with and without a
// registry, draining, and removal freeing the base.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "bases/base_set.h"
#include "common/sha256.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

using Clock = std::chrono::steady_clock;

std::string online_dir() { return testing::shared_dir() + "/models/stories260K"; }
std::string candidate_dir() { return testing::shared_dir() + "/eval/bases/candidate-good"; }

BaseSetOptions small_options() {
  BaseSetOptions o;
  o.engine.max_loras = 2;
  o.engine.kv_cache_bytes = 8ll << 20;
  return o;
}

class BaseSetTest : public ::testing::Test {
 protected:
  void SetUp() override { LG_REQUIRE_SHARED("eval/bases/candidate-good/model.safetensors"); }

  // Serving "online", with candidate "good" loaded beside it.
  static void serve_two(BaseSet& bases) {
    ASSERT_TRUE(bases.start_serving({"online", online_dir(), WeightType::kF32}, "test").is_ok());
    ASSERT_TRUE(bases.add({"good", candidate_dir(), WeightType::kF32}).is_ok());
    ASSERT_TRUE(bases.wait_loaded("good", Clock::now() + std::chrono::seconds(60)));
  }

  static BaseState state_of(const BaseSet& bases, const std::string& name) {
    for (const BaseStatus& s : bases.list()) {
      if (s.name == name) return s.state;
    }
    ADD_FAILURE() << name << " is not listed";
    return BaseState::kFailed;
  }
};

TEST_F(BaseSetTest, CandidateLoadsBesideTheServingBaseWithItsIdentity) {
  BaseSet bases(small_options(), nullptr);
  serve_two(bases);
  EXPECT_EQ(bases.serving()->name(), "online");
  EXPECT_EQ(state_of(bases, "good"), BaseState::kCandidate);
  auto good = bases.find("good");
  ASSERT_TRUE(good.is_ok());
  EXPECT_EQ((*good)->sha256(), sha256_file(candidate_dir() + "/model.safetensors").value());
  EXPECT_EQ((*good)->fingerprint(), "good-" + (*good)->sha256().substr(0, 8));
  EXPECT_FALSE((*good)->loop().serving());
  EXPECT_TRUE(bases.serving()->loop().serving());
  EXPECT_NE((*good)->sha256(), bases.serving()->sha256());
  EXPECT_EQ(bases.add({"good", candidate_dir(), WeightType::kF32}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(bases.find("nope").status().code(), StatusCode::kNotFound);
}

TEST_F(BaseSetTest, MemoryBudgetRefusesALoadThatDoesNotFitAndSaysTheSizes) {
  BaseSetOptions o = small_options();
  BaseSet probe(o, nullptr);
  ASSERT_TRUE(probe.start_serving({"online", online_dir(), WeightType::kF32}, "test").is_ok());
  const int64_t one = probe.serving()->memory_bytes();
  o.memory_budget_bytes = one + one / 2;  // room for one base, not two
  BaseSet bases(o, nullptr);
  ASSERT_TRUE(bases.start_serving({"online", online_dir(), WeightType::kF32}, "test").is_ok());
  Status s = bases.add({"good", candidate_dir(), WeightType::kF32});
  EXPECT_EQ(s.code(), StatusCode::kInsufficientMemory) << "not transient: 507, not 429";
  for (const char* part : {"needs", "weights", "KV", "budget", "online"}) {
    EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
  }
  EXPECT_EQ(bases.list().size(), 1u) << "nothing half-added";
}

// Issue 19: DELETE of a base still running a request (an evaluation) took it
// out of the budget at once, so a third base loaded beside two resident ones.
TEST_F(BaseSetTest, ARemovedBaseCountsAgainstTheBudgetUntilItIsFreed) {
  BaseSetOptions o = small_options();
  int64_t one = 0;
  {
    BaseSet probe(o, nullptr);
    ASSERT_TRUE(probe.start_serving({"online", online_dir(), WeightType::kF32}, "test").is_ok());
    one = probe.serving()->memory_bytes();
  }
  o.memory_budget_bytes = 2 * one + one / 2;  // room for two bases, not three
  BaseSet bases(o, nullptr);
  serve_two(bases);
  Result<std::shared_ptr<ServingBase>> held = bases.find("good");  // a request still running on it
  ASSERT_TRUE(held.is_ok());
  ASSERT_TRUE(bases.remove("good").is_ok());
  Status refused = bases.add({"again", candidate_dir(), WeightType::kF32});
  EXPECT_EQ(refused.code(), StatusCode::kInsufficientMemory) << refused.to_string();
  EXPECT_NE(refused.message().find("good"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("draining"), std::string::npos) << refused.message();

  held = Status::cancelled("the request ended");  // the last reference: the reaper frees it
  Status added = Status::internal("never tried");
  for (int i = 0; i < 200; ++i) {
    added = bases.add({"again", candidate_dir(), WeightType::kF32});
    if (added.is_ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(added.is_ok()) << added.to_string();
  EXPECT_TRUE(bases.wait_loaded("again", Clock::now() + std::chrono::seconds(60)));
}

TEST_F(BaseSetTest, PromoteNeedsEveryAdapterNameUnlessForcedAndRollbackReturns) {
  BaseSet bases(small_options(), nullptr);
  serve_two(bases);
  ASSERT_TRUE(bases.serving()->adapters()->add("mia", testing::shared_dir() + "/eval/adapters/online/mia").is_ok());
  Result<SwapRecord> refused = bases.promote("good", false, "test");
  ASSERT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("adapter 'mia'"), std::string::npos) << refused.status().message();
  EXPECT_EQ(bases.serving()->name(), "online") << "a refused promote changes nothing";

  Result<SwapRecord> forced = bases.promote("good", true, "test");
  ASSERT_TRUE(forced.is_ok()) << forced.status().to_string();
  EXPECT_TRUE(forced->forced);
  EXPECT_EQ(forced->from_base, "online");
  EXPECT_EQ(bases.serving()->name(), "good");
  EXPECT_EQ(state_of(bases, "online"), BaseState::kPrevious);
  EXPECT_TRUE(bases.serving()->loop().serving());
  EXPECT_FALSE(bases.find("online").value()->loop().serving());

  Result<SwapRecord> back = bases.rollback("test");
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->kind, "rollback");
  EXPECT_EQ(bases.serving()->name(), "online");
  EXPECT_EQ(state_of(bases, "good"), BaseState::kPrevious);
  EXPECT_EQ(bases.swaps_total("promote"), 1);
  EXPECT_EQ(bases.swaps_total("rollback"), 1);
  EXPECT_EQ(bases.promote("online", false, "test").status().code(), StatusCode::kFailedPrecondition)
      << "already serving";
}

TEST_F(BaseSetTest, RegistryRecordsStatesSwapsAndScenarioChecks) {
  auto registry = Registry::open(":memory:");
  ASSERT_TRUE(registry.is_ok());
  BaseSet bases(small_options(), registry->get());
  serve_two(bases);
  Registry& r = **registry;
  EXPECT_EQ(r.get_base_model("online")->state, BaseModelState::kServing);
  EXPECT_EQ(r.get_base_model("good")->state, BaseModelState::kCandidate);
  EXPECT_EQ(r.get_base_model("good")->sha256, bases.find("good").value()->sha256());

  AdapterRecord mia{"mia", "online", testing::shared_dir() + "/eval/adapters/online/mia", 8, 16, {"q_proj"}, "", 0};
  ASSERT_TRUE(r.add_adapter(mia).is_ok());
  ASSERT_TRUE(r.set_scenario("mia-story", "online", "mia").is_ok());
  mia.base_model = "good";
  mia.path = testing::shared_dir() + "/eval/adapters/candidate-good/mia";
  ASSERT_TRUE(r.add_adapter(mia).is_ok());
  ASSERT_TRUE(bases.find("good").value()->adapters()->add("mia", mia.path).is_ok());
  Result<SwapRecord> refused = bases.promote("good", false, "test");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("scenario 'mia-story'"), std::string::npos) << refused.status().message();
  EXPECT_EQ(refused.status().message().find("adapter 'mia'"), std::string::npos) << "mia has a version on good";
  ASSERT_TRUE(r.set_scenario("mia-story", "good", "mia").is_ok());
  Result<SwapRecord> swap = bases.promote("good", false, "alice");
  ASSERT_TRUE(swap.is_ok()) << swap.status().to_string();
  EXPECT_EQ(r.get_base_model("good")->state, BaseModelState::kServing);
  EXPECT_EQ(r.get_base_model("online")->state, BaseModelState::kPrevious);
  auto swaps = r.list_swaps(10);
  ASSERT_TRUE(swaps.is_ok());
  EXPECT_EQ(swaps->front().actor, "alice");
  EXPECT_EQ(swaps->front().to_base, "good");
  EXPECT_FALSE(swaps->front().forced);

  ASSERT_TRUE(bases.remove("online").is_ok());
  EXPECT_EQ(r.get_base_model("online")->state, BaseModelState::kRetired);
}

TEST_F(BaseSetTest, ADemotedBaseDrainsItsRequestsAndIsFreedOnlyWhenTheLastEnds) {
  BaseSet bases(small_options(), nullptr);
  serve_two(bases);
  std::shared_ptr<ServingBase> old = bases.serving();
  old->begin_request();  // a request captured before the swap, still running
  ASSERT_TRUE(bases.promote("good", true, "test").is_ok());
  EXPECT_EQ(state_of(bases, "online"), BaseState::kDraining);
  old->end_request();
  EXPECT_EQ(state_of(bases, "online"), BaseState::kPrevious);

  EXPECT_EQ(bases.remove("good").code(), StatusCode::kFailedPrecondition) << "good serves";
  std::weak_ptr<ServingBase> watch = old;
  ASSERT_TRUE(bases.remove("online").is_ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(watch.expired()) << "a holder keeps it alive";
  old.reset();
  for (int i = 0; i < 100 && !watch.expired(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(watch.expired()) << "the reaper frees it once nobody holds it";
  EXPECT_EQ(bases.find("online").status().code(), StatusCode::kNotFound);
}

TEST_F(BaseSetTest, ABaseThatFailsToLoadIsReportedAndTheServingOneIsUntouched) {
  const std::string dir = testing::make_temp_dir("lg-broken-base");
  std::filesystem::copy_file(candidate_dir() + "/config.json", dir + "/config.json");
  std::ofstream(dir + "/model.safetensors") << "garbage";
  BaseSet bases(small_options(), nullptr);
  ASSERT_TRUE(bases.start_serving({"online", online_dir(), WeightType::kF32}, "test").is_ok());
  ASSERT_TRUE(bases.add({"broken", dir, WeightType::kF32}).is_ok());
  ASSERT_TRUE(bases.wait_loaded("broken", Clock::now() + std::chrono::seconds(30)));
  EXPECT_EQ(state_of(bases, "broken"), BaseState::kFailed);
  EXPECT_EQ(bases.find("broken").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(bases.promote("broken", true, "t").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(bases.serving()->name(), "online");
  EXPECT_FALSE(bases.add({"bad-dir", dir + "/missing", WeightType::kF32}).is_ok()) << "checked before loading";
  ASSERT_TRUE(bases.remove("broken").is_ok());
}

}  // namespace
}  // namespace loragate
