// A BaseSet whose promote asks the evaluation history (as `loragate serve`
// wires it): refused with every reason, listed with the same reasons, and a
// forced promote recorded with what it overrode.
#include <gtest/gtest.h>

#include <filesystem>

#include "bases/base_set.h"
#include "common/sha256.h"
#include "evaluator/gates.h"
#include "evaluator/report.h"
#include "tests/test_util.h"
#include "upgrade/promotion_check.h"

namespace loragate::eval {
namespace {

using Clock = std::chrono::steady_clock;

class ForcedPromotionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("eval/bases/candidate-good/model.safetensors");
    dir_ = testing::make_temp_dir("lg-forced-promotion");
    registry_ = Registry::open(dir_ + "/registry.db").value();
    store_ = EvaluationStore::open(dir_ + "/registry.db").value();
    BaseSetOptions o;
    o.engine.max_loras = 2;
    o.engine.kv_cache_bytes = 8ll << 20;
    bases_ = std::make_unique<BaseSet>(o, registry_.get());
    ASSERT_TRUE(bases_->start_serving({"online", testing::shared_dir() + "/models/stories260K", WeightType::kF32}, "t")
                    .is_ok());
    ASSERT_TRUE(bases_->add({"good", testing::shared_dir() + "/eval/bases/candidate-good", WeightType::kF32}).is_ok());
    ASSERT_TRUE(bases_->wait_loaded("good", Clock::now() + std::chrono::seconds(60)));
    bases_->set_promote_check([this](const ServingBase& serving, const ServingBase& candidate) {
      return promotion_blockers(*registry_, *store_, PromotionRequirements{}, {serving.name(), serving.sha256()},
                                {candidate.name(), candidate.sha256()});
    });
  }
  void TearDown() override {
    bases_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // A stored run of "good" against "online" (no scenarios are routed, so none is needed).
  int64_t store_run(const std::string& verdict, const std::string& gates_sha256) {
    RunResult run;
    run.online_base = "online";
    run.online_sha256 = bases_->find("online").value()->sha256();
    run.candidate_base = "good";
    run.candidate_sha256 = bases_->find("good").value()->sha256();
    run.suite_sha256 = "suite";
    run.gates_sha256 = gates_sha256;
    EvaluationRecord r;
    r.online_base = run.online_base;
    r.online_sha256 = run.online_sha256;
    r.candidate_base = run.candidate_base;
    r.candidate_sha256 = run.candidate_sha256;
    r.adapters = "{}";
    r.suite_sha256 = run.suite_sha256;
    r.gates_sha256 = run.gates_sha256;
    r.verdict = verdict;
    r.report = report_json(run).dump();
    return store_->add(r).value();
  }

  std::string dir_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<EvaluationStore> store_;
  std::unique_ptr<BaseSet> bases_;
};

TEST_F(ForcedPromotionTest, RefusedWithEveryReasonAndForcedPromoteRecordsThem) {
  store_run("pass", sha256_hex(GateConfig{}.to_yaml()));  // every gate off
  const int64_t failed = store_run("fail", sha256_hex(GateConfig::defaults().to_yaml()));
  const std::string gates_reason = "its gates";
  const std::string failed_reason = "evaluation run " + std::to_string(failed) + " of the same pair";

  ASSERT_TRUE(bases_->has_promote_check());
  Result<std::vector<std::string>> listed = bases_->promotion_blockers("good");
  ASSERT_TRUE(listed.is_ok()) << listed.status().to_string();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_NE((*listed)[0].find(gates_reason), std::string::npos) << (*listed)[0];
  EXPECT_NE((*listed)[1].find(failed_reason), std::string::npos) << (*listed)[1];
  EXPECT_EQ(bases_->promotion_blockers("online").value().size(), 1u) << "serving already";

  Result<SwapRecord> refused = bases_->promote("good", false, "alice");
  ASSERT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  for (const std::string& part : {gates_reason, failed_reason, std::string("promote with force")}) {
    EXPECT_NE(refused.status().message().find(part), std::string::npos) << refused.status().message();
  }
  EXPECT_EQ(bases_->serving()->name(), "online");

  Result<SwapRecord> forced = bases_->promote("good", true, "alice");
  ASSERT_TRUE(forced.is_ok()) << forced.status().to_string();
  EXPECT_TRUE(forced->forced);
  const std::vector<SwapRecord> swaps = registry_->list_swaps(1).value();
  ASSERT_EQ(swaps.size(), 1u);
  EXPECT_TRUE(swaps[0].forced);
  for (const std::string& part : {gates_reason, failed_reason}) {
    EXPECT_NE(forced->note.find(part), std::string::npos) << forced->note;
    EXPECT_NE(swaps[0].note.find(part), std::string::npos) << "recorded in the registry: " << swaps[0].note;
  }

  // Back, evaluated again with the default gates: promote needs no force and records none.
  ASSERT_TRUE(bases_->rollback("alice").is_ok());
  store_run("pass", sha256_hex(GateConfig::defaults().to_yaml()));
  EXPECT_TRUE(bases_->promotion_blockers("good").value().empty());
  Result<SwapRecord> promoted = bases_->promote("good", false, "alice");
  ASSERT_TRUE(promoted.is_ok()) << promoted.status().to_string();
  EXPECT_FALSE(promoted->forced);
  EXPECT_TRUE(promoted->note.empty()) << promoted->note;
}

}  // namespace
}  // namespace loragate::eval
