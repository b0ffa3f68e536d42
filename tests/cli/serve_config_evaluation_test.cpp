// ServeConfig's evaluation section: the suite and gates a run must have used
// to authorise promote, and how many evaluations run at once.
#include <gtest/gtest.h>

#include "cli/serve_config.h"

namespace loragate {
namespace {

TEST(ServeConfigEvaluationTest, SuiteGatesAndMaxRunningAreRead) {
  auto c = ServeConfig::parse(R"(
evaluation:
  roots: [/srv/eval]
  require_pass_to_promote: true
  suite: /srv/eval/suite.yaml
  gates: /srv/eval/gates.yaml
  max_running: 3
)", "test.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->eval_suite, "/srv/eval/suite.yaml");
  EXPECT_EQ(c->eval_gates, "/srv/eval/gates.yaml");
  EXPECT_EQ(c->eval_max_running, 3);
  EXPECT_EQ(c->eval_roots, std::vector<std::string>{"/srv/eval"});

  auto defaults = ServeConfig::parse("evaluation: {roots: [/srv/eval]}\n", "test.yaml");
  ASSERT_TRUE(defaults.is_ok());
  EXPECT_TRUE(defaults->eval_suite.empty()) << "no suite: any suite covering the routed scenarios";
  EXPECT_TRUE(defaults->eval_gates.empty()) << "no gates: the shipped defaults";
  EXPECT_EQ(defaults->eval_max_running, 1);
}

TEST(ServeConfigEvaluationTest, BadValuesNameTheKey) {
  for (const auto& [bad, key] : std::vector<std::pair<std::string, std::string>>{
           {"evaluation: {max_running: 0}", "evaluation.max_running"},
           {"evaluation: {max_running: many}", "evaluation.max_running"},
           {"evaluation: {suite: [a, b]}", "evaluation.suite"},
           {"evaluation: {gate: x.yaml}", "evaluation.gate"}}) {
    auto r = ServeConfig::parse(bad, "bad.yaml");
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace loragate
