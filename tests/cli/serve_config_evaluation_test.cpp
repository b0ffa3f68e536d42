// ServeConfig's evaluation section: the suite and gates a run must have used
// to authorise promote, and how many evaluations run at once.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/serve_config.h"
#include "tests/cli/cli_runner.h"
#include "tests/test_util.h"

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

// The configured suite is read at start-up: one that does not load stops the
// server before it serves, naming the key.
TEST(ServeConfigEvaluationTest, ServeRefusesToStartOnASuiteThatDoesNotLoad) {
  LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
  const std::string dir = testing::make_temp_dir("lg-serve-eval-config");
  std::ofstream(dir + "/serve.yaml") << "model: {path: " << testing::shared_dir() << "/models/stories260K}\n"
                                     << "adapters: {registry: " << dir << "/registry.db}\n"
                                     << "server: {port: 0}\n"
                                     << "evaluation: {suite: " << dir << "/absent-suite.yaml}\n";
  CliRun r = run_cli("serve --config " + dir + "/serve.yaml");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("evaluation.suite"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("loragate: serving"), std::string::npos) << "it never served: " << r.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace loragate
