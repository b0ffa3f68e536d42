// promotion_blockers on a real registry file and real stored runs: a passing
// run authorises promote only when it measured these two bases, covered every
// scenario routed now with the adapters routed now, used the configured suite
// and gates, and no newer run of the pair failed. And force: a BaseSet
// promote over those reasons is recorded with them.
#include "upgrade/promotion_check.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "bases/base_set.h"
#include "common/sha256.h"
#include "evaluator/gates.h"
#include "evaluator/report.h"
#include "evaluator/run_history.h"
#include "tests/test_util.h"

namespace loragate::eval {
namespace {

std::string joined_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// True when some line holds every one of `parts`.
bool some_line_says(const std::vector<std::string>& lines, std::initializer_list<std::string> parts) {
  for (const std::string& l : lines) {
    bool all = true;
    for (const std::string& p : parts) all = all && l.find(p) != std::string::npos;
    if (all) return true;
  }
  return false;
}

class PromotionCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("lg-promotion");
    auto registry = Registry::open(dir_ + "/registry.db");
    ASSERT_TRUE(registry.is_ok()) << registry.status().to_string();
    registry_ = std::move(registry).value();
    auto store = EvaluationStore::open(dir_ + "/registry.db");
    ASSERT_TRUE(store.is_ok()) << store.status().to_string();
    store_ = std::move(store).value();
    for (const BaseIdentity* b : {&serving_, &candidate_}) {
      BaseModelRecord r;
      r.name = b->name;
      r.path = "/models/" + b->name;
      r.state = b == &serving_ ? BaseModelState::kServing : BaseModelState::kCandidate;
      r.sha256 = b->sha256;
      ASSERT_TRUE(registry_->upsert_base_model(r).is_ok());
      for (const char* scenario : {"mia", "cat"}) {
        ASSERT_TRUE(registry_->add_adapter(adapter(scenario, b->name)).is_ok());
        ASSERT_TRUE(registry_->set_scenario(scenario, b->name, scenario).is_ok());
      }
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static AdapterRecord adapter(const std::string& name, const std::string& base) {
    AdapterRecord r;
    r.name = name;
    r.base_model = base;
    r.path = "/adapters/" + base + "/" + name;
    r.rank = 8;
    r.alpha = 16;
    r.target_modules = {"q_proj"};
    r.sha256 = sha256_hex(name + "@" + base);
    return r;
  }

  // A run of `candidate` against `online` on `scenarios`, each arm with the
  // adapter the registry routes now, stored with `verdict`.
  int64_t store_run(const std::vector<std::string>& scenarios, const std::string& verdict,
                    const std::string& gates_sha256, const std::string& suite_sha256 = "suite",
                    BaseIdentity online = {}, BaseIdentity candidate = {}) {
    if (online.name.empty()) online = serving_;
    if (candidate.name.empty()) candidate = candidate_;
    RunResult run;
    run.started_at = 100;
    run.online_base = online.name;
    run.online_sha256 = online.sha256;
    run.candidate_base = candidate.name;
    run.candidate_sha256 = candidate.sha256;
    run.suite_sha256 = suite_sha256;
    run.gates_sha256 = gates_sha256;
    for (const std::string& s : scenarios) {
      ScenarioResult result;
      result.name = s;
      for (auto [arm, base] : {std::pair<std::string, std::string>{"online", serving_.name}, {"candidate", candidate_.name}}) {
        ArmResult a;
        a.arm = arm;
        a.base = base;
        a.adapter_sha256 = routed_adapter(*registry_, s, base).value().sha256;
        a.items.push_back(ItemResult{});
        a.items.back().id = "1";
        result.arms[arm] = a;
      }
      run.scenarios.push_back(result);
    }
    EvaluationRecord record;
    record.started_at = run.started_at;
    record.finished_at = run.started_at + 1;
    record.online_base = run.online_base;
    record.online_sha256 = run.online_sha256;
    record.candidate_base = run.candidate_base;
    record.candidate_sha256 = run.candidate_sha256;
    record.adapters = adapters_json(run);
    record.suite_sha256 = run.suite_sha256;
    record.gates_sha256 = run.gates_sha256;
    record.verdict = verdict;
    record.report = report_json(run).dump();
    Result<int64_t> id = store_->add(record);
    EXPECT_TRUE(id.is_ok()) << id.status().to_string();
    return id.is_ok() ? *id : 0;
  }

  std::vector<std::string> blockers(const PromotionRequirements& required = {}) {
    Result<std::vector<std::string>> r = promotion_blockers(*registry_, *store_, required, serving_, candidate_);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? *r : std::vector<std::string>{"error"};
  }

  const std::string default_gates_ = sha256_hex(GateConfig::defaults().to_yaml());
  BaseIdentity serving_{"A", sha256_hex("weights of A")};
  BaseIdentity candidate_{"B", sha256_hex("weights of B")};
  std::string dir_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<EvaluationStore> store_;
};

TEST_F(PromotionCheckTest, NoPassingRunAsksForOne) {
  store_run({"mia", "cat"}, "fail", default_gates_);
  store_run({"mia", "cat"}, "cancelled", default_gates_);
  const std::vector<std::string> why = blockers();
  ASSERT_EQ(why.size(), 1u) << joined_lines(why);
  EXPECT_TRUE(some_line_says(why, {"no passing evaluation", "'B'", "'A'"})) << joined_lines(why);
}

TEST_F(PromotionCheckTest, EveryConditionMetAuthorises) {
  store_run({"cat", "mia"}, "pass", default_gates_);
  EXPECT_TRUE(blockers().empty()) << joined_lines(blockers());
  store_run({"mia", "cat"}, "inconclusive", default_gates_);
  store_run({"mia", "cat"}, "cancelled", default_gates_);
  EXPECT_TRUE(blockers().empty()) << "only a newer failure counts against it: " << joined_lines(blockers());
}

TEST_F(PromotionCheckTest, AOneScenarioSuiteDoesNotAuthoriseAndTheMissingScenarioIsNamed) {
  const int64_t id = store_run({"mia"}, "pass", default_gates_);
  const std::vector<std::string> why = blockers();
  ASSERT_EQ(why.size(), 1u) << joined_lines(why);
  EXPECT_TRUE(some_line_says(why, {"evaluation run " + std::to_string(id), "scenario 'cat'", "not in the run"}))
      << joined_lines(why);
}

TEST_F(PromotionCheckTest, AScenarioRoutedAfterTheRunIsRequiredToo) {
  store_run({"mia", "cat"}, "pass", default_gates_);
  for (const BaseIdentity* b : {&serving_, &candidate_}) {
    ASSERT_TRUE(registry_->add_adapter(adapter("sunny", b->name)).is_ok());
    ASSERT_TRUE(registry_->set_scenario("sunny", b->name, "sunny").is_ok());
  }
  EXPECT_TRUE(some_line_says(blockers(), {"scenario 'sunny'", "not in the run"})) << joined_lines(blockers());
}

TEST_F(PromotionCheckTest, AdaptersChangedSinceOrUnroutedOnTheCandidateAreNamed) {
  store_run({"mia", "cat"}, "pass", default_gates_);
  ASSERT_TRUE(registry_->set_scenario("mia", candidate_.name, "cat").is_ok());
  ASSERT_TRUE(registry_->set_scenario("mia", serving_.name, "cat").is_ok());
  ASSERT_TRUE(registry_->remove_scenario("cat", candidate_.name).is_ok());
  const std::vector<std::string> why = blockers();
  EXPECT_EQ(why.size(), 3u) << joined_lines(why);
  EXPECT_TRUE(some_line_says(why, {"scenario 'mia' on 'B'", "routes it to 'cat'", "changed since"})) << joined_lines(why);
  EXPECT_TRUE(some_line_says(why, {"scenario 'mia' on 'A'", "changed since"})) << "the online arm too: "
                                                                                    << joined_lines(why);
  EXPECT_TRUE(some_line_says(why, {"scenario 'cat'", "not on 'B'"})) << joined_lines(why);
}

TEST_F(PromotionCheckTest, AnotherGatesFileDoesNotAuthoriseAndTheGatesAreNamed) {
  const std::string lenient = sha256_hex(GateConfig{}.to_yaml());  // every gate off
  store_run({"mia", "cat"}, "pass", lenient);
  std::vector<std::string> why = blockers();
  ASSERT_EQ(why.size(), 1u) << joined_lines(why);
  EXPECT_TRUE(some_line_says(why, {"its gates", "default gates", "evaluation.gates is not set"})) << joined_lines(why);

  // Configured gates: the defaults' run does not authorise, one with that file's content does.
  const std::string path = dir_ + "/gates.yaml";
  std::ofstream(path) << "adapter: {keyword_rate: {max_drop: 0.01}}\n";
  Result<PromotionRequirements> required = load_promotion_requirements("", path);
  ASSERT_TRUE(required.is_ok()) << required.status().to_string();
  EXPECT_EQ(required->gates_sha256, sha256_hex(GateConfig::load(path).value().to_yaml()));
  store_run({"mia", "cat"}, "pass", default_gates_);
  why = blockers(*required);
  EXPECT_TRUE(some_line_says(why, {"evaluation.gates " + path})) << joined_lines(why);
  EXPECT_TRUE(blockers().empty()) << "the defaults' run is chosen when no gates are configured";
  store_run({"mia", "cat"}, "pass", required->gates_sha256);
  EXPECT_TRUE(blockers(*required).empty()) << joined_lines(blockers(*required));
  EXPECT_TRUE(blockers().empty()) << "the older run with the defaults is still chosen when none are configured";
}

TEST_F(PromotionCheckTest, AnotherSuiteDoesNotAuthoriseWhenOneIsConfigured) {
  const std::string suite = dir_ + "/suite.yaml";
  std::ofstream(dir_ + "/mia.jsonl") << R"({"id": "1", "prompt": "Once", "reference": "upon a time"})" << "\n";
  std::ofstream(suite) << "scenarios:\n  mia: {eval: mia.jsonl}\n";
  Result<PromotionRequirements> required = load_promotion_requirements(suite, "");
  ASSERT_TRUE(required.is_ok()) << required.status().to_string();
  EXPECT_FALSE(required->suite_sha256.empty());
  EXPECT_NE(load_promotion_requirements(dir_ + "/absent.yaml", "").status().message().find("evaluation.suite"),
            std::string::npos);

  store_run({"mia", "cat"}, "pass", default_gates_, "another suite");
  EXPECT_TRUE(blockers().empty()) << "no suite configured: any suite covering the scenarios";
  const std::vector<std::string> why = blockers(*required);
  ASSERT_EQ(why.size(), 1u) << joined_lines(why);
  EXPECT_TRUE(some_line_says(why, {"its suite", "evaluation.suite " + suite})) << joined_lines(why);
  store_run({"mia", "cat"}, "pass", default_gates_, required->suite_sha256);
  EXPECT_TRUE(blockers(*required).empty()) << joined_lines(blockers(*required));
}

TEST_F(PromotionCheckTest, ANewerFailingRunOfThePairRefuses) {
  store_run({"mia", "cat"}, "pass", default_gates_);
  store_run({"mia", "cat"}, "fail", default_gates_, "suite", {"A-old", sha256_hex("weights of A-old")});
  EXPECT_TRUE(blockers().empty()) << "another pair's failure does not count: " << joined_lines(blockers());
  const int64_t failed = store_run({"mia"}, "fail", sha256_hex(GateConfig{}.to_yaml()), "another suite");
  const std::vector<std::string> why = blockers();
  ASSERT_EQ(why.size(), 1u) << joined_lines(why);
  EXPECT_TRUE(some_line_says(why, {"evaluation run " + std::to_string(failed), "same pair", "failed"}))
      << "whatever suite or gates it ran: " << joined_lines(why);
  store_run({"mia", "cat"}, "pass", default_gates_);
  EXPECT_TRUE(blockers().empty()) << "a pass after the failure authorises again";
}

TEST_F(PromotionCheckTest, ARunOfOtherBasesIsShownWithWhatDiffers) {
  const BaseIdentity old_online{"A", sha256_hex("weights of A before")};
  const BaseIdentity old_candidate{"B", sha256_hex("weights of B before")};
  store_run({"mia", "cat"}, "pass", default_gates_, "suite", old_online, old_candidate);
  const std::vector<std::string> why = blockers();
  EXPECT_EQ(why.size(), 2u) << joined_lines(why);
  EXPECT_TRUE(some_line_says(why, {"its online base 'A' (" + old_online.sha256.substr(0, 8), "not the serving base"}))
      << joined_lines(why);
  EXPECT_TRUE(some_line_says(why, {"its candidate 'B' (" + old_candidate.sha256.substr(0, 8), "not the promoted base"}))
      << joined_lines(why);
}

}  // namespace
}  // namespace loragate::eval
