// `loragate upgrade` against a real `loragate serve` (../shared/eval, a short
// recipe, gates a few training steps can meet): scenarios record their
// training sets with `scenario set --train`; candidate-bad is refused with
// the failing gates named and exit 1; candidate-good is retrained, evaluated
// and promoted, exit 0. A server killed mid-upgrade shows it interrupted after
// its restart, and asking again resumes it under the same id.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"
#include "tests/serve/serve_calls.h"
#include "tests/serve/server_process.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

using nlohmann::json;
using testing::ServerProcess;
using Clock = std::chrono::steady_clock;

std::string upgrade_fixtures_dir() { return testing::shared_dir() + "/eval"; }

class UpgradeE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("eval/bases/candidate-bad/model.safetensors");
    dir_ = testing::make_temp_dir("lg-upgrade-e2e");
    std::ofstream suite(dir_ + "/suite.yaml");
    suite << "scenarios:\n";
    for (const char* s : {"mia", "cat", "sunny"}) {
      suite << "  " << s << ": {eval: " << upgrade_fixtures_dir() << "/scenarios/" << s << "/eval.jsonl, max_tokens: 48}\n";
    }
    suite << "generic: " << upgrade_fixtures_dir() << "/generic/heldout.jsonl\n";
    suite.close();
    // The defaults, but for the adapter rules a few training steps cannot meet (a keyword floor stays).
    std::ofstream(dir_ + "/gates.yaml")
        << "adapter:\n  keyword_rate: {floor: 0.5, max_drop: null}\n  exact_match_rate:\n  rougeL_f1:\n"
           "  token_f1:\n  nll_mean:\n  negative_flip_rate:\nrecorded:\n";
    std::ofstream(dir_ + "/serve.yaml")
        << "model: {path: " << testing::shared_dir() << "/models/stories260K, served_name: online}\n"
        << "adapters: {roots: [" << upgrade_fixtures_dir() << "/adapters], registry: " << dir_ << "/registry.db}\n"
        << "bases: {roots: [" << upgrade_fixtures_dir() << "/bases]}\n"
        << "training: {roots: [" << upgrade_fixtures_dir() << "/scenarios], dir: " << dir_ << "/trained}\n"
        << "evaluation: {roots: [" << dir_ << ", " << upgrade_fixtures_dir() << "], suite: " << dir_
        << "/suite.yaml, gates: " << dir_ << "/gates.yaml}\n"
        << "engine: {kv_cache_mib: 16, max_loras: 2}\n"
        << "auth: {admin_token: " << testing::kServeToken << "}\n";
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::string start_server(ServerProcess& server) {
    const std::string url = server.start({"--config", dir_ + "/serve.yaml"});
    EXPECT_FALSE(url.empty()) << server.output();
    return url;
  }
  // The admin CLI against `url`.
  CliRun cli(const std::string& url, const std::string& args) {
    return run_cli(args + " --url " + url + " --token " + testing::kServeToken);
  }
  // Registers scenario `s` on the serving base with its online adapter and training set.
  void serve_scenario(const std::string& url, const std::string& s, const std::string& recipe) {
    CliRun added = cli(url, "adapter add " + s + " " + upgrade_fixtures_dir() + "/adapters/online/" + s);
    ASSERT_EQ(added.exit_code, 0) << added.out;
    CliRun set = cli(url, "scenario set " + s + " " + s + " --train " + upgrade_fixtures_dir() + "/scenarios/" + s +
                              "/train.jsonl " + recipe);
    ASSERT_EQ(set.exit_code, 0) << set.out;
    const std::string data =
        std::filesystem::canonical(upgrade_fixtures_dir() + "/scenarios/" + s + "/train.jsonl").string();
    EXPECT_NE(set.out.find("trains from " + data), std::string::npos) << set.out;
  }
  std::string serving(const std::string& url) {
    const json bases = json::parse(testing::serve_call(url, "GET", "/admin/bases").body, nullptr, false);
    for (const json& b : bases.value("data", json::array())) {
      if (b.value("state", "") == "serving") return b.value("name", "");
    }
    return "";
  }
  json upgrade(const std::string& url, int64_t id) {
    return json::parse(testing::serve_call(url, "GET", "/admin/upgrades/" + std::to_string(id)).body, nullptr, false);
  }

  std::string dir_;
};

TEST_F(UpgradeE2eTest, RefusesTheBadCandidateNamingTheGatesAndPromotesTheGoodOne) {
  ServerProcess server;
  const std::string url = start_server(server);
  ASSERT_FALSE(url.empty());
  for (const char* s : {"mia", "cat", "sunny"}) serve_scenario(url, s, "--steps 6");
  CliRun listed = cli(url, "scenario ls");
  EXPECT_NE(listed.out.find("TRAINING SET"), std::string::npos) << listed.out;

  CliRun bad = cli(url, "upgrade --candidate candidate-bad --path " + upgrade_fixtures_dir() + "/bases/candidate-bad --promote");
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.out.find("verdict: fail"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("failing gates"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("generic/perplexity"), std::string::npos) << bad.out;
  // Both reports, the gates counted per verdict, every progress line stamped with its time.
  const std::string reports = "reports: " + dir_ + "/trained/candidate-bad/upgrade-1-run-1.json (JSON), " + dir_ +
                              "/trained/candidate-bad/upgrade-1-run-1.html (HTML)";
  EXPECT_NE(bad.out.find(reports), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find(" failed, "), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("gates: "), std::string::npos) << bad.out;
  // Rejected by the gates that need no adapter, before any training.
  EXPECT_NE(bad.out.find(" s] stage base      failed in "), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("no adapter was trained"), std::string::npos) << bad.out;
  EXPECT_EQ(bad.out.find(" training"), std::string::npos) << bad.out;
  // The page says the run it shows: the one the CLI names.
  std::ifstream page(dir_ + "/trained/candidate-bad/upgrade-1-run-1.html");
  const std::string html((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  EXPECT_EQ(html.find("run 0"), std::string::npos);
  EXPECT_NE(html.find("run 1"), std::string::npos) << html.substr(0, 2000);
  EXPECT_EQ(serving(url), "online");

  CliRun good = cli(url, "upgrade --candidate candidate-good --path " + upgrade_fixtures_dir() + "/bases/candidate-good --promote");
  EXPECT_EQ(good.exit_code, 0) << good.out;
  for (const char* s : {"mia", "cat", "sunny"}) {
    EXPECT_NE(good.out.find(std::string(s) + " "), std::string::npos) << good.out;
  }
  EXPECT_NE(good.out.find("registered"), std::string::npos) << good.out;
  EXPECT_NE(good.out.find("verdict: pass"), std::string::npos) << good.out;
  EXPECT_NE(good.out.find("promoted"), std::string::npos) << good.out;
  EXPECT_EQ(serving(url), "candidate-good");
  EXPECT_EQ(server.stop(), 0) << server.output();
}

TEST_F(UpgradeE2eTest, AKilledServerShowsTheUpgradeInterruptedAndAskingAgainResumesIt) {
  ServerProcess server;
  std::string url = start_server(server);
  ASSERT_FALSE(url.empty());
  serve_scenario(url, "mia", "--steps 400 --batch 8");
  // Retraining is what a kill interrupts: every adapter is retrained, none carried over.
  const json body = {{"candidate", "candidate-good"},
                     {"path", upgrade_fixtures_dir() + "/bases/candidate-good"},
                     {"strategy", "retrain-all"}};
  const json started = json::parse(testing::serve_call(url, "POST", "/admin/upgrades", body).body, nullptr, false);
  ASSERT_TRUE(started.contains("id")) << started.dump();
  const int64_t id = started["id"];
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline && upgrade(url, id)["steps"][0].value("step", 0) < 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(upgrade(url, id)["state"], "training");
  server.kill_now();

  ServerProcess again;
  url = start_server(again);
  ASSERT_FALSE(url.empty());
  const json after = upgrade(url, id);
  EXPECT_EQ(after["state"], "interrupted") << after.dump(2);
  const json resumed = json::parse(testing::serve_call(url, "POST", "/admin/upgrades", body).body, nullptr, false);
  EXPECT_EQ(resumed["id"], id) << resumed.dump();
  EXPECT_EQ(testing::serve_call(url, "DELETE", "/admin/upgrades/" + std::to_string(id)).status, 200);
  EXPECT_EQ(again.stop(), 0) << again.output();
}

}  // namespace
}  // namespace loragate
