// Shutdown of the real binary while an evaluation runs: SIGTERM must end the
// process within server.shutdown_deadline_ms (a long evaluation is cancelled,
// not waited for), and the cancelled run is in the history after a restart.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "client/http_client.h"
#include "tests/serve/server_process.h"
#include "tests/test_util.h"

namespace loragate {
namespace shutdown_test {

using nlohmann::json;
using testing::ServerProcess;

constexpr const char* kShutdownToken = "shutdown-token";

std::string shutdown_eval_dir() { return testing::shared_dir() + "/eval"; }

client::HttpResult admin_call(const std::string& url, const std::string& method, const std::string& target,
                        const json& body = nullptr) {
  auto c = client::HttpClient::create(url);
  EXPECT_TRUE(c.is_ok());
  if (!c.is_ok()) return {};
  auto r = c->request(method, target, body.is_null() ? "" : body.dump(),
                      {{"Authorization", std::string("Bearer ") + kShutdownToken}});
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? *r : client::HttpResult{};
}

class ShutdownTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("eval/bases/candidate-good/model.safetensors");
    dir_ = testing::make_temp_dir("lg-shutdown");
    // One scenario with its eval set repeated: an evaluation of minutes on this model.
    std::ifstream in(shutdown_eval_dir() + "/scenarios/mia/eval.jsonl");
    std::vector<json> items;
    for (std::string line; std::getline(in, line);) items.push_back(json::parse(line));
    std::ofstream big(dir_ + "/long.jsonl");
    for (int round = 0; round < 50; ++round) {
      for (json item : items) {
        item["id"] = item.at("id").get<std::string>() + "-r" + std::to_string(round);
        big << item.dump() << "\n";
      }
    }
    std::ofstream(dir_ + "/long-suite.yaml") << "scenarios:\n  mia: {eval: long.jsonl, max_tokens: 200}\n";
    std::ofstream(dir_ + "/config.yaml") << "model: {path: " << testing::shared_dir()
                                         << "/models/stories260K, served_name: online}\n"
                                         << "adapters: {roots: [" << shutdown_eval_dir() << "/adapters], registry: " << dir_
                                         << "/registry.db}\n"
                                         << "bases: {roots: [" << shutdown_eval_dir() << "/bases]}\n"
                                         << "evaluation: {roots: [" << dir_ << "]}\n"
                                         << "engine: {max_loras: 4, kv_cache_mib: 64}\n"
                                         << "server: {io_threads: 2, shutdown_deadline_ms: 2000}\n";
  }

  std::string start(ServerProcess& p) {
    const std::string url = p.start({"--config", dir_ + "/config.yaml", "--admin-token", kShutdownToken});
    EXPECT_FALSE(url.empty()) << p.output();
    return url;
  }

  std::string dir_;
};

TEST_F(ShutdownTest, SigtermCancelsARunningEvaluationWithinTheDeadlineAndStoresItCancelled) {
  ServerProcess server;
  const std::string url = start(server);
  ASSERT_FALSE(url.empty());
  for (const char* base : {"online", "candidate-good"}) {
    json adapter = {{"name", "mia"}, {"path", shutdown_eval_dir() + "/adapters/" + base + "/mia"}};
    json scenario = {{"adapter", "mia"}};
    if (std::string(base) != "online") {
      auto added = admin_call(url, "POST", "/admin/bases", {{"name", base}, {"path", shutdown_eval_dir() + "/bases/" + base}});
      ASSERT_EQ(added.status, 202) << added.body;
      std::string state = "loading";
      json all;
      for (int i = 0; i < 300 && state == "loading"; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        all = json::parse(admin_call(url, "GET", "/admin/bases").body);
        for (const json& b : all.at("data")) {
          if (b.at("name").get<std::string>() == base) state = b.at("state").get<std::string>();
        }
      }
      ASSERT_EQ(state, "candidate") << all.dump();
      adapter["base"] = scenario["base"] = base;
    }
    ASSERT_EQ(admin_call(url, "POST", "/admin/adapters", adapter).status, 201) << base;
    ASSERT_EQ(admin_call(url, "PUT", "/admin/scenarios/mia", scenario).status, 200) << base;
  }
  auto started = admin_call(url, "POST", "/admin/evaluations", {{"candidate", "candidate-good"}, {"suite", dir_ + "/long-suite.yaml"}});
  ASSERT_EQ(started.status, 202) << started.body;
  const std::string target = "/admin/evaluations/" + std::to_string(json::parse(started.body).value("id", 0));
  json job;
  for (int i = 0; i < 600; ++i) {  // until it has made progress (and is far from done)
    job = json::parse(admin_call(url, "GET", target).body);
    const std::string state = job.value("state", "");
    if (job.value("done", 0) > 0 || (state != "running" && state != "queued")) break;  // queued: not taken yet
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(job.value("state", ""), "running") << job.dump();
  ASSERT_GT(job.value("done", 0), 0) << job.dump();
  ASSERT_LT(job.value("done", 0), job.value("total", 0)) << job.dump();

  const auto sigterm = std::chrono::steady_clock::now();
  EXPECT_EQ(server.stop(), 0) << "not exited within 30 s of SIGTERM";
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sigterm).count();
  // The 2 s deadline, plus the moment to store the cancelled run, on a loaded machine.
  EXPECT_LT(seconds, 5.0) << "SIGTERM took " << seconds << " s with shutdown_deadline_ms 2000";

  ServerProcess again;
  const std::string url2 = start(again);
  ASSERT_FALSE(url2.empty());
  const json runs = json::parse(admin_call(url2, "GET", "/admin/evaluations").body).at("runs");
  ASSERT_EQ(runs.size(), 1u) << runs.dump();
  EXPECT_EQ(runs[0].at("verdict"), "cancelled") << runs.dump();
  EXPECT_EQ(runs[0].at("candidate"), "candidate-good");
  // A cancelled run authorises nothing.
  EXPECT_EQ(admin_call(url2, "POST", "/admin/bases/candidate-good/promote").status, 409);
  EXPECT_EQ(again.stop(), 0);
}

}  // namespace shutdown_test
}  // namespace loragate
