// EvaluationStore beside the registry's tables, on both backends.
#include "registry/evaluation_store.h"

#include <gtest/gtest.h>

#include "registry/registry.h"
#include "tests/registry/pg_server.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

EvaluationRecord run(const std::string& candidate_sha, const std::string& online_sha, const std::string& verdict) {
  EvaluationRecord r;
  r.started_at = 100;
  r.finished_at = 160;
  r.online_base = "online";
  r.online_sha256 = online_sha;
  r.candidate_base = "cand";
  r.candidate_sha256 = candidate_sha;
  r.adapters = R"({"candidate/mia": "ab"})";
  r.suite_sha256 = "s";
  r.gates_sha256 = "g";
  r.verdict = verdict;
  r.report = R"({"verdict": ")" + verdict + "\"}";
  return r;
}

class EvaluationStoreTest : public testing::OnBothBackends<testing::RegistryLocationTest> {};

TEST_P(EvaluationStoreTest, StoresRunsBesideTheRegistryAndListsTheRunsOfACandidate) {
  const std::string path = location("registry.db");
  auto registry = Registry::open(path);  // the same file, another connection
  ASSERT_TRUE(registry.is_ok()) << registry.status().to_string();
  auto store = EvaluationStore::open(path);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  auto first = (*store)->add(run("c1", "o1", "pass"));
  auto second = (*store)->add(run("c1", "o1", "fail"));
  auto third = (*store)->add(run("c2", "o1", "pass"));
  ASSERT_TRUE(first.is_ok() && second.is_ok() && third.is_ok());
  EXPECT_LT(*first, *second);

  auto got = (*store)->get(*second);
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ(got->verdict, "fail");
  EXPECT_EQ(got->report, R"({"verdict": "fail"})");
  EXPECT_EQ(got->adapters, R"({"candidate/mia": "ab"})");
  EXPECT_EQ((*store)->get(999).status().code(), StatusCode::kNotFound);

  auto listed = (*store)->list(2);
  ASSERT_TRUE(listed.is_ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ(listed->front().id, *third) << "newest first";
  EXPECT_TRUE(listed->front().report.empty()) << "listings leave the report out";

  auto of_c1 = (*store)->runs_of_candidate("c1", "");
  ASSERT_TRUE(of_c1.is_ok()) << of_c1.status().to_string();
  ASSERT_EQ(of_c1->size(), 2u);
  EXPECT_EQ((*of_c1)[0].id, *second) << "newest first";
  EXPECT_EQ((*of_c1)[1].verdict, "pass");
  EXPECT_TRUE((*of_c1)[0].report.empty());
  EXPECT_EQ((*store)->runs_of_candidate("nope", "cand").value().size(), 3u) << "the candidate's name matches too";
  EXPECT_EQ((*store)->runs_of_candidate("c1", "", 1).value().size(), 1u);
  EXPECT_EQ((*store)->runs_of_candidate("c1", "", 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->add(run("c", "o", "maybe")).status().code(), StatusCode::kInvalidArgument);

  // Reopened, the history is still there.
  store->reset();
  auto again = EvaluationStore::open(path);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ((*again)->list().value().size(), 3u);
}

// The recorded reference of a base: the newest passing run on the same suite
// content that measured it, in whichever arm.
TEST_P(EvaluationStoreTest, LatestPassMeasuringABaseMatchesTheSuiteAndEitherArm) {
  const std::string path = location("registry.db");
  auto store = EvaluationStore::open(path);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  EvaluationStore& s = **store;
  const int64_t as_candidate = s.add(run("b", "a", "pass")).value();
  EvaluationRecord other_suite = run("c", "b", "pass");
  other_suite.suite_sha256 = "t";
  ASSERT_TRUE(s.add(other_suite).is_ok());
  ASSERT_TRUE(s.add(run("c", "b", "fail")).is_ok());
  EvaluationRecord cancelled = run("b", "z", "cancelled");
  ASSERT_TRUE(s.add(cancelled).is_ok());

  auto found = s.latest_pass_measuring("b", "s");
  ASSERT_TRUE(found.is_ok()) << found.status().to_string();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->id, as_candidate) << "another suite's, a failing and a cancelled run are never used";
  EXPECT_FALSE((*found)->report.empty()) << "the reference is read whole";
  const int64_t as_online = s.add(run("d", "b", "pass")).value();
  EXPECT_EQ(s.latest_pass_measuring("b", "s").value()->id, as_online) << "as online, when that run is newer";
  EXPECT_EQ(s.latest_pass_measuring("b", "t").value()->suite_sha256, "t");
  EXPECT_FALSE(s.latest_pass_measuring("b", "u").value().has_value());
  EXPECT_FALSE(s.latest_pass_measuring("", "s").value().has_value());
  EXPECT_FALSE(s.latest_pass_measuring("b", "").value().has_value());
}

INSTANTIATE_TEST_SUITE_P(Backends, EvaluationStoreTest, testing::kBothBackends, testing::backend_name);

}  // namespace
}  // namespace loragate
