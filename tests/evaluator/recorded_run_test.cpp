// The recorded arm on a real store: A serves, B is evaluated against it and
// promoted, C is evaluated against B. C's recorded gates compare against B's
// own figures (the candidate arm of the run that promoted it), never A's, and
// never a run of another suite.
#include "evaluator/run_history.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/sha256.h"
#include "evaluator/report.h"
#include "tests/test_util.h"

namespace loragate::eval {
namespace {

constexpr int kItems = 40;

const std::string kShaA = sha256_hex("weights of A");
const std::string kShaB = sha256_hex("weights of B");
const std::string kShaC = sha256_hex("weights of C");

ArmResult arm(const std::string& name, const std::string& base, double rouge) {
  ArmResult a;
  a.arm = name;
  a.base = base;
  for (int i = 0; i < kItems; ++i) {
    ItemResult item;
    item.id = "item-" + std::to_string(i);
    item.rougeL_f1 = rouge + 0.001 * (i % 5);  // not constant: an interval has some width
    a.items.push_back(item);
  }
  return a;
}

// A run of `candidate` against `online` on scenario "mia", each arm's ROUGE-L around the given value.
RunResult run_of(const std::string& online, const std::string& online_sha, double online_rouge,
                 const std::string& candidate, const std::string& candidate_sha, double candidate_rouge,
                 const std::string& suite_sha256) {
  RunResult run;
  run.online_base = online;
  run.online_sha256 = online_sha;
  run.candidate_base = candidate;
  run.candidate_sha256 = candidate_sha;
  run.suite_sha256 = suite_sha256;
  ScenarioResult s;
  s.name = "mia";
  s.arms["online"] = arm("online", online, online_rouge);
  s.arms["candidate"] = arm("candidate", candidate, candidate_rouge);
  run.scenarios.push_back(s);
  return run;
}

int64_t store(EvaluationStore& store, const RunResult& run, const std::string& verdict,
              const nlohmann::json& live = nullptr) {
  EvaluationRecord r;
  r.online_base = run.online_base;
  r.online_sha256 = run.online_sha256;
  r.candidate_base = run.candidate_base;
  r.candidate_sha256 = run.candidate_sha256;
  r.adapters = adapters_json(run);
  r.suite_sha256 = run.suite_sha256;
  r.gates_sha256 = "g";
  r.verdict = verdict;
  nlohmann::json report = report_json(run);
  if (!live.is_null()) report["live"] = live;
  r.report = report.dump();
  return store.add(r).value();
}

GateConfig recorded_gates() {
  return GateConfig::parse("recorded: {rougeL_f1: {max_drop: 0.5}}\n", "test gates", GateConfig{}).value();
}

TEST(RecordedRunTest, AfterAToBThenCTheRecordedArmIsBsCandidateArmOnTheSameSuite) {
  const std::string dir = testing::make_temp_dir("lg-recorded");
  auto opened = EvaluationStore::open(dir + "/registry.db");
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  EvaluationStore& history = **opened;
  const nlohmann::json live_b = {{"mia", {{"agreement", 0.9}, {"requests", 12}}}};

  // A serves; B is evaluated against it (B around 0.6, A around 0.2) and promoted.
  const int64_t promoted_b = store(history, run_of("A", kShaA, 0.2, "B", kShaB, 0.6, "suite S"), "pass", live_b);
  // Runs that must never be B's reference on suite S: another suite (newer), a failure (newer).
  const int64_t other_suite = store(history, run_of("B", kShaB, 0.9, "X", sha256_hex("X"), 0.9, "suite T"), "pass");
  store(history, run_of("B", kShaB, 0.1, "Y", sha256_hex("Y"), 0.1, "suite S"), "fail");

  Result<std::optional<RecordedRun>> recorded = recorded_run(history, kShaB, "suite S");
  ASSERT_TRUE(recorded.is_ok()) << recorded.status().to_string();
  ASSERT_TRUE(recorded->has_value());
  EXPECT_EQ((*recorded)->run.id, promoted_b);
  EXPECT_EQ((*recorded)->arm, "candidate") << "B was that run's candidate: its figures are that arm";
  EXPECT_EQ((*recorded)->live, live_b) << "B's live shadow figures are recorded too";
  Result<std::optional<RecordedRun>> on_t = recorded_run(history, kShaB, "suite T");
  ASSERT_TRUE(on_t.is_ok() && on_t->has_value());
  EXPECT_EQ((*on_t)->run.id, other_suite);
  EXPECT_EQ((*on_t)->arm, "online");
  EXPECT_TRUE((*on_t)->live.is_null()) << "a run's live figures are of its candidate, not of its online base";
  EXPECT_FALSE(recorded_run(history, kShaB, "suite U").value().has_value()) << "another suite is never used";

  // C is evaluated against B (serving now) on suite S: C around 0.5.
  RunResult c = run_of("B", kShaB, 0.6, "C", kShaC, 0.5, "suite S");
  const std::vector<GateResult> gates = evaluate_gates(recorded_gates(), c, (*recorded)->reference());
  ASSERT_EQ(gates.size(), 1u);
  EXPECT_EQ(gates[0].against, "recorded");
  EXPECT_NEAR(gates[0].estimate, 0.5 - 0.6, 1e-9) << "C against B's figures (+0.3 would be A's): " << gates[0].why;

  // Judged and stored, the run names what it compared against, and it reads back.
  Result<RunResult> judged = judge_and_store(c, recorded_gates(), history);
  ASSERT_TRUE(judged.is_ok()) << judged.status().to_string();
  EXPECT_EQ(judged->recorded_run_id, promoted_b);
  EXPECT_EQ(judged->recorded_arm, "candidate");
  ASSERT_EQ(judged->gates.size(), 1u);
  EXPECT_NEAR(judged->gates[0].estimate, -0.1, 1e-9);
  const EvaluationRecord stored = history.get(judged->id).value();
  const nlohmann::json report = nlohmann::json::parse(stored.report);
  EXPECT_EQ(report.at("recorded_run_id"), promoted_b);
  EXPECT_EQ(report.at("recorded_arm"), "candidate");
  EXPECT_EQ(report.at("recorded_live"), live_b);
  const RunResult back = parse_stored(stored).value();
  EXPECT_EQ(back.recorded_run_id, promoted_b);
  EXPECT_EQ(back.recorded_arm, "candidate");

  Result<std::optional<RecordedRun>> named = stored_reference(history, report);
  ASSERT_TRUE(named.is_ok()) << named.status().to_string();
  ASSERT_TRUE(named->has_value());
  EXPECT_EQ((*named)->run.id, promoted_b);
  EXPECT_EQ((*named)->arm, "candidate");
  const std::vector<GateResult> again = evaluate_gates(recorded_gates(), back, (*named)->reference());
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].verdict, judged->gates[0].verdict) << "`eval show` judges it the same way again";
  std::filesystem::remove_all(dir);
}

TEST(RecordedRunTest, StoredReferenceReadsOldReportsAndRefusesMalformedOnes) {
  const std::string dir = testing::make_temp_dir("lg-recorded");
  auto opened = EvaluationStore::open(dir + "/registry.db");
  ASSERT_TRUE(opened.is_ok());
  EvaluationStore& history = **opened;
  const int64_t id = store(history, run_of("A", kShaA, 0.2, "B", kShaB, 0.6, "suite S"), "pass");

  EXPECT_FALSE(stored_reference(history, nlohmann::json::object()).value().has_value()) << "names none";
  Result<std::optional<RecordedRun>> old = stored_reference(history, {{"recorded_run_id", id}});
  ASSERT_TRUE(old.is_ok() && old->has_value()) << old.status().to_string();
  EXPECT_EQ((*old)->arm, "online") << "reports stored before the arm was named compared against online";
  EXPECT_EQ(stored_reference(history, {{"recorded_run_id", "7"}}).status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(stored_reference(history, {{"recorded_run_id", id}, {"recorded_arm", "sideways"}}).status().code(),
            StatusCode::kCorrupt);
  EXPECT_EQ(stored_reference(history, {{"recorded_run_id", id + 100}}).status().code(), StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace loragate::eval
