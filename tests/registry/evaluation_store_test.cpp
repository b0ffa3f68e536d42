// EvaluationStore on a real SQLite file beside the registry's tables.
#include "registry/evaluation_store.h"

#include <gtest/gtest.h>

#include "registry/registry.h"
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

TEST(EvaluationStoreTest, StoresRunsBesideTheRegistryAndFindsTheLatestPass) {
  const std::string path = testing::make_temp_dir("lg-evals") + "/registry.db";
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

  auto pass = (*store)->latest_pass("c1", "o1");
  ASSERT_TRUE(pass.is_ok());
  ASSERT_TRUE(pass->has_value());
  EXPECT_EQ((*pass)->id, *first) << "the failing run after it does not count";
  EXPECT_FALSE((*store)->latest_pass("c1", "other").value().has_value());
  EXPECT_EQ((*store)->latest_pass("", "o1").value()->id, *third);
  EXPECT_EQ((*store)->add(run("c", "o", "maybe")).status().code(), StatusCode::kInvalidArgument);

  // Reopened, the history is still there.
  store->reset();
  auto again = EvaluationStore::open(path);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ((*again)->list().value().size(), 3u);
}

}  // namespace
}  // namespace loragate
