// What a client may name is checked against the routes kept in memory:
// unknown scenario names never reach SQLite nor push real routes out, an
// adapter is routable only once it is validated and recorded, adapter names
// never shadow a base's name, and a response names the base it addressed.
#include <future>
#include <random>
#include <set>
#include <thread>

#include <sqlite3.h>

#include "tests/gateway/admin_fixture.h"

namespace loragate::testing {
namespace {

using nlohmann::json;

class KnownRoutesTest : public AdminGatewayTest {
 protected:
  ClientResponse complete(const std::map<std::string, std::string>& headers, const json& extra = json::object()) {
    json body = {{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0}};
    body.update(extra);
    return post_json(port_, "/v1/completions", body, headers);
  }
  ClientResponse register_adapter(const std::string& name) {
    return admin(http::verb::post, "/admin/adapters", {{"name", name}, {"path", lora_dir("a")}});
  }
};

TEST_F(KnownRoutesTest, UnknownScenariosNeitherQueryTheRegistryNorEvictRealRoutes) {
  ASSERT_EQ(register_adapter("a").status, 201);
  ASSERT_EQ(admin(http::verb::put, "/admin/scenarios/s", {{"adapter", "a"}}).status, 200);
  ASSERT_EQ(complete({{"X-Scenario", "s"}}).status, 200);
  const uint64_t lookups = resolver_->registry_lookups();

  std::mt19937_64 random(19);
  for (int i = 0; i < 10000; ++i) {
    const std::string name = "unknown-" + std::to_string(random());
    Result<std::string> r = resolver_->resolve_scenario(name, "stories");
    ASSERT_FALSE(r.is_ok());
    ASSERT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().to_string();
  }
  for (int i = 0; i < 5; ++i) {
    ClientResponse r = complete({{"X-Scenario", "unknown-http-" + std::to_string(i)}});
    EXPECT_EQ(r.status, 404) << r.body;
  }
  EXPECT_EQ(resolver_->registry_lookups(), lookups) << "unknown names reached the registry";
  EXPECT_EQ(complete({{"X-Scenario", "s"}}).status, 200);
  EXPECT_EQ(resolver_->registry_lookups(), lookups) << "the real route was evicted";
}

TEST_F(KnownRoutesTest, AnUnknownScenarioIsRefusedWhileARegistryWriteWaitsOnSQLite) {
  ASSERT_EQ(register_adapter("a").status, 201);
  // Another connection holds SQLite's write lock: a scenario write then waits
  // on it (busy timeout) while it holds the registry.
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/registry.db").c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  auto write = std::async(std::launch::async, [this] {
    return admin(http::verb::put, "/admin/scenarios/s", {{"adapter", "a"}}).status;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto start = Clock::now();
  EXPECT_EQ(complete({{"X-Scenario", "never-registered"}}).status, 404);
  EXPECT_LT(ms_since(start), 2000) << "an unknown name waited for the registry";
  ASSERT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(other);
  EXPECT_EQ(write.get(), 200);
}

TEST_F(KnownRoutesTest, AnAdapterInTheCacheButNotYetRecordedIsNotRoutable) {
  // What a registration does before its validating load and its registry row.
  ASSERT_TRUE(bases_->serving()->adapters()->add("pending", lora_dir("a")).is_ok());
  ClientResponse r = complete({}, {{"model", "pending"}});
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(r.json()["error"]["param"], "model") << r.body;
}

TEST_F(KnownRoutesTest, AnAdapterIsRoutableOnceRegistered) {
  ASSERT_EQ(register_adapter("a").status, 201);
  ClientResponse r = complete({}, {{"model", "a"}});
  EXPECT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(admin(http::verb::delete_, "/admin/adapters/a").status, 200);
  EXPECT_EQ(complete({}, {{"model", "a"}}).status, 404);
}

TEST_F(KnownRoutesTest, AnAdapterCannotTakeABaseName) {
  ClientResponse vllm = admin(http::verb::post, "/v1/load_lora_adapter",
                              {{"lora_name", "stories"}, {"lora_path", lora_dir("a")}});
  EXPECT_EQ(vllm.status, 409) << vllm.body;
  EXPECT_NE(vllm.body.find("base model"), std::string::npos) << vllm.body;
  ClientResponse admin_route = register_adapter("stories");
  EXPECT_EQ(admin_route.status, 409) << admin_route.body;

  const json listed = http_call(port_, http::verb::get, "/v1/models", "",
                                {{"Authorization", std::string("Bearer ") + kAdminToken}})
                          .json();
  int named_stories = 0;
  for (const json& m : listed["data"]) named_stories += m["id"] == "stories" ? 1 : 0;
  EXPECT_EQ(named_stories, 1) << listed.dump();
}

TEST_F(KnownRoutesTest, AResponseNamesTheBaseAddressedByXBase) {
  ASSERT_EQ(admin(http::verb::post, "/admin/bases", {{"name", "v2"}, {"path", gateway_fixture_dir() + "/models/stories260K"}})
                .status,
            202);
  ASSERT_TRUE(wait_for_base("v2", "candidate", std::chrono::seconds(30)));
  ClientResponse r = complete({{"X-Base", "v2"}, {"Authorization", std::string("Bearer ") + kAdminToken}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["model"], "v2");
  ClientResponse serving = complete({});
  ASSERT_EQ(serving.status, 200) << serving.body;
  EXPECT_EQ(serving.json()["model"], "stories");
}

}  // namespace
}  // namespace loragate::testing
