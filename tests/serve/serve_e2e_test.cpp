// `loragate serve` end to end, as an operator runs it: a real process on a
// loopback port, a real SQLite registry file, the admin API behind a token,
// scenarios, metrics, restart, and graceful SIGTERM.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "client/http_client.h"
#include "tests/serve/server_process.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

constexpr const char* kToken = "test-token-123";
using testing::ServerProcess;

class ServeE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("models/stories260K-lora/a/adapter_model.safetensors");
    dir_ = testing::make_temp_dir("lg-serve");
    std::ofstream(dir_ + "/config.yaml") << "model: {path: " << testing::shared_dir() << "/models/stories260K, "
                                         << "served_name: stories}\n"
                                         << "adapters: {roots: [" << testing::shared_dir()
                                         << "/models/stories260K-lora], registry: " << dir_ << "/registry.db}\n"
                                         << "server: {io_threads: 2}\n";
  }

  std::string start(ServerProcess& p, bool with_token = true) {
    std::vector<std::string> args = {"--config", dir_ + "/config.yaml"};
    if (with_token) args.insert(args.end(), {"--admin-token", kToken});
    const std::string url = p.start(args);
    EXPECT_FALSE(url.empty()) << p.output();
    return url;
  }

  static client::HttpResult call(const std::string& url, const std::string& method, const std::string& target,
                                 const nlohmann::json& body = nullptr, bool auth = true) {
    auto c = client::HttpClient::create(url);
    EXPECT_TRUE(c.is_ok());
    client::Headers headers;
    if (auth) headers.emplace_back("Authorization", std::string("Bearer ") + kToken);
    auto r = c->request(method, target, body.is_null() ? "" : body.dump(), headers);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? *r : client::HttpResult{};
  }

  static nlohmann::json completion(const std::string& model, int max_tokens = 48) {
    return {{"model", model}, {"prompt", "Once upon a time"}, {"max_tokens", max_tokens}, {"temperature", 0}};
  }

  std::string adapter_path(const char* name) const {
    return testing::shared_dir() + "/models/stories260K-lora/" + name;
  }

  std::string dir_;
};

std::string golden_continuation(const char* variant) {
  std::ifstream in(testing::shared_dir() + "/models/golden.json");
  return nlohmann::json::parse(in).at("cases")[0].at("outputs").at(variant).at("continuation_text");
}

TEST_F(ServeE2eTest, RegisterUseListUnregisterAndRestart) {
  ServerProcess server;
  const std::string url = start(server);

  auto added = call(url, "POST", "/admin/adapters", {{"name", "a"}, {"path", adapter_path("a")}});
  ASSERT_EQ(added.status, 201) << added.body;
  const auto record = nlohmann::json::parse(added.body);
  EXPECT_EQ(record.at("rank"), 8);
  EXPECT_EQ(record.at("sha256").get<std::string>().size(), 64u);

  auto used = call(url, "POST", "/v1/completions", completion("a"));
  ASSERT_EQ(used.status, 200) << used.body;
  EXPECT_EQ(nlohmann::json::parse(used.body).at("choices")[0].at("text"), golden_continuation("a"));

  auto scenario = call(url, "PUT", "/admin/scenarios/stories-b", {{"adapter", "b"}});
  EXPECT_EQ(scenario.status, 404) << "adapter b is not registered yet: " << scenario.body;
  ASSERT_EQ(call(url, "POST", "/v1/load_lora_adapter", {{"lora_name", "b"}, {"lora_path", adapter_path("b")}}).status, 201);
  ASSERT_EQ(call(url, "PUT", "/admin/scenarios/stories-b", {{"adapter", "b"}}).status, 200);
  nlohmann::json by_scenario = completion("");
  by_scenario["scenario"] = "stories-b";
  auto routed = call(url, "POST", "/v1/completions", by_scenario);
  ASSERT_EQ(routed.status, 200) << routed.body;
  EXPECT_EQ(nlohmann::json::parse(routed.body).at("choices")[0].at("text"), golden_continuation("b"));

  auto listed = nlohmann::json::parse(call(url, "GET", "/admin/adapters").body);
  ASSERT_EQ(listed.at("data").size(), 2u);
  EXPECT_EQ(listed.at("data")[0].at("name"), "a");
  EXPECT_EQ(listed.at("data")[0].at("requests"), 1);
  auto models = nlohmann::json::parse(call(url, "GET", "/v1/models", nullptr, false).body);
  EXPECT_EQ(models.at("data").size(), 3u) << models.dump();

  EXPECT_EQ(call(url, "DELETE", "/admin/adapters/b").status, 409) << "scenario stories-b still uses b";
  ASSERT_EQ(call(url, "DELETE", "/admin/adapters/a").status, 200);
  EXPECT_EQ(call(url, "POST", "/v1/completions", completion("a")).status, 404);

  auto metrics = call(url, "GET", "/metrics", nullptr, false);
  EXPECT_NE(metrics.body.find("loragate_requests_total{base=\"stories\",adapter=\"a\",status=\"200\"} 1"), std::string::npos)
      << metrics.body.substr(0, 2000);
  EXPECT_NE(metrics.body.find("loragate_time_to_first_token_seconds_bucket{base=\"stories\",adapter=\"b\""), std::string::npos);
  EXPECT_NE(metrics.body.find("loragate_kv_blocks_total"), std::string::npos);
  EXPECT_EQ(server.stop(), 0) << "SIGTERM must drain and exit 0\n" << server.output();

  // The registry file keeps b and its scenario across a restart; a is gone.
  ServerProcess again;
  const std::string url2 = start(again);
  auto restored = nlohmann::json::parse(call(url2, "GET", "/admin/adapters").body);
  ASSERT_EQ(restored.at("data").size(), 1u);
  EXPECT_EQ(restored.at("data")[0].at("name"), "b");
  auto after = call(url2, "POST", "/v1/completions", by_scenario);
  ASSERT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(nlohmann::json::parse(after.body).at("choices")[0].at("text"), golden_continuation("b"));
  EXPECT_EQ(again.stop(), 0);
}

TEST_F(ServeE2eTest, AdminAuthAndPathChecks) {
  ServerProcess server;
  const std::string url = start(server);
  const nlohmann::json body = {{"name", "a"}, {"path", adapter_path("a")}};
  EXPECT_EQ(call(url, "POST", "/admin/adapters", body, /*auth=*/false).status, 401);
  auto c = client::HttpClient::create(url);
  auto wrong = c->request("GET", "/admin/adapters", "", {{"Authorization", "Bearer wrong-token"}});
  EXPECT_EQ(wrong->status, 401);

  // Outside the adapter root: directly, through "..", and through a symlink.
  EXPECT_EQ(call(url, "POST", "/admin/adapters", {{"name", "x"}, {"path", testing::shared_dir() + "/models/stories260K"}}).status, 400);
  EXPECT_EQ(call(url, "POST", "/admin/adapters", {{"name", "x"}, {"path", adapter_path("a") + "/../../stories260K"}}).status, 400);
  std::filesystem::create_directory_symlink(testing::shared_dir() + "/models/stories260K", dir_ + "/out");
  auto via_link = call(url, "POST", "/admin/adapters", {{"name", "x"}, {"path", dir_ + "/out"}});
  EXPECT_EQ(via_link.status, 400) << via_link.body;
  EXPECT_NE(via_link.body.find("outside every configured adapter root"), std::string::npos) << via_link.body;
  // Bad names and bodies.
  EXPECT_EQ(call(url, "POST", "/admin/adapters", {{"name", "has space"}, {"path", adapter_path("a")}}).status, 400);
  EXPECT_EQ(call(url, "POST", "/admin/adapters", {{"name", "a"}}).status, 400);
  auto duplicate = call(url, "POST", "/admin/adapters", body);
  ASSERT_EQ(duplicate.status, 201) << duplicate.body;
  EXPECT_EQ(call(url, "POST", "/admin/adapters", body).status, 409) << "already registered";
  EXPECT_EQ(call(url, "DELETE", "/admin/adapters/never-registered").status, 404);
  EXPECT_EQ(server.stop(), 0);
}

TEST_F(ServeE2eTest, NamesAreConfinedAndPathsPercentDecoded) {
  ServerProcess server;
  const std::string url = start(server);
  auto refused = call(url, "POST", "/admin/adapters", {{"name", "victim?x"}, {"path", adapter_path("a")}});
  EXPECT_EQ(refused.status, 400) << refused.body;
  ASSERT_EQ(call(url, "POST", "/admin/adapters", {{"name", "victim"}, {"path", adapter_path("a")}}).status, 201);
  ASSERT_EQ(call(url, "POST", "/admin/adapters", {{"name", "a.b"}, {"path", adapter_path("b")}}).status, 201);
  // As the CLI sends it: percent-encoded; the server decodes the path.
  EXPECT_EQ(call(url, "DELETE", "/admin/adapters/a%2Eb").status, 200);
  const auto left = nlohmann::json::parse(call(url, "GET", "/admin/adapters").body).at("data");
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].at("name"), "victim") << "only a.b was removed";
  EXPECT_EQ(server.stop(), 0);
}

TEST_F(ServeE2eTest, NoTokenConfiguredMeansAdminForbidden) {
  ServerProcess server;
  const std::string url = start(server, /*with_token=*/false);
  EXPECT_EQ(call(url, "GET", "/admin/adapters").status, 403);
  EXPECT_EQ(call(url, "POST", "/v1/load_lora_adapter", {{"lora_name", "a"}, {"lora_path", adapter_path("a")}}).status, 403);
  EXPECT_EQ(call(url, "GET", "/health", nullptr, false).status, 200);
  EXPECT_EQ(server.stop(), 0);
}

TEST(ServeConfigErrorTest, BadConfigStopsWithTheKey) {
  const std::string dir = testing::make_temp_dir("lg-serve-bad");
  std::ofstream(dir + "/c.yaml") << "engine: {max_loras: -3}\n";
  ServerProcess p;
  EXPECT_EQ(p.start({"--config", dir + "/c.yaml"}), "");
  EXPECT_NE(p.output().find("engine.max_loras"), std::string::npos) << p.output();
}

}  // namespace
}  // namespace loragate
