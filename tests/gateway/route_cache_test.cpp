// Scenario routes cached in memory: every admin write that can change one is
// seen by the next request (no stale routes), and a cached route answers
// without the registry — even while another connection holds SQLite's write
// lock and a registry write waits on it.
#include <sqlite3.h>

#include <chrono>
#include <fstream>
#include <future>
#include <thread>

#include "tests/gateway/admin_fixture.h"

namespace loragate::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

class RouteCacheTest : public AdminGatewayTest {
 protected:
  void SetUp() override {
    AdminGatewayTest::SetUp();
    if (HasFatalFailure()) return;  // the base could not start
    std::ifstream in(gateway_fixture_dir() + "/models/golden.json");
    golden_ = json::parse(in);
  }

  // Which adapter ("base", "a", "b", "c") served scenario `scenario`, told by
  // its greedy golden continuation; "HTTP <status>" when it was refused.
  std::string served_by(const std::string& scenario) {
    const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 48}, {"temperature", 0}};
    ClientResponse r = post_json(port_, "/v1/completions", body, {{"X-Scenario", scenario}});
    if (r.status != 200) return "HTTP " + std::to_string(r.status);
    const json text = r.json()["choices"][0]["text"];
    for (const char* which : {"base", "a", "b", "c"}) {
      if (golden_["cases"][0]["outputs"][which]["continuation_text"] == text) return which;
    }
    return "an unknown continuation";
  }

  ClientResponse register_on(const std::string& name, const std::string& base) {
    json body = {{"name", name}, {"path", lora_dir(name)}};
    if (!base.empty()) body["base"] = base;
    return admin(http::verb::post, "/admin/adapters", body);
  }

  json golden_;
};

TEST_F(RouteCacheTest, EveryAdminWriteIsSeenByTheNextRequest) {
  EXPECT_EQ(served_by("s"), "HTTP 404");  // unknown: refused from memory
  ASSERT_EQ(register_on("a", "").status, 201);
  EXPECT_EQ(served_by("s"), "HTTP 404");
  ASSERT_EQ(admin(http::verb::put, "/admin/scenarios/s", {{"adapter", "a"}}).status, 200);
  EXPECT_EQ(served_by("s"), "a");
  ASSERT_EQ(register_on("b", "").status, 201);
  EXPECT_EQ(served_by("s"), "a");
  ASSERT_EQ(admin(http::verb::put, "/admin/scenarios/s", {{"adapter", "b"}}).status, 200);
  EXPECT_EQ(served_by("s"), "b");
  ASSERT_EQ(admin(http::verb::delete_, "/admin/adapters/a").status, 200);
  EXPECT_EQ(served_by("s"), "b");

  // A second base where s is served by c; promote and roll back switch the route.
  ASSERT_EQ(admin(http::verb::post, "/admin/bases",
                  {{"name", "v2"}, {"path", gateway_fixture_dir() + "/models/stories260K"}})
                .status,
            202);
  ASSERT_TRUE(wait_for_base("v2", "candidate", std::chrono::seconds(30)));
  ASSERT_EQ(register_on("c", "v2").status, 201);
  ASSERT_EQ(admin(http::verb::put, "/admin/scenarios/s", {{"adapter", "c"}, {"base", "v2"}}).status, 200);
  EXPECT_EQ(served_by("s"), "b") << "v2's route is not the serving base's";
  ClientResponse promoted = admin(http::verb::post, "/admin/bases/v2/promote", {{"force", true}});
  ASSERT_EQ(promoted.status, 200) << promoted.body;
  EXPECT_EQ(served_by("s"), "c");
  ClientResponse rolled_back = admin(http::verb::post, "/admin/bases/rollback", json::object());
  ASSERT_EQ(rolled_back.status, 200) << rolled_back.body;
  EXPECT_EQ(served_by("s"), "b");

  ASSERT_EQ(admin(http::verb::delete_, "/admin/scenarios/s").status, 200);
  EXPECT_EQ(served_by("s"), "HTTP 404");
}

TEST_F(RouteCacheTest, ACachedRouteAnswersWithoutTheRegistry) {
  ASSERT_EQ(register_on("a", "").status, 201);
  ASSERT_EQ(register_on("b", "").status, 201);
  ASSERT_EQ(admin(http::verb::put, "/admin/scenarios/s", {{"adapter", "a"}}).status, 200);
  EXPECT_EQ(served_by("s"), "a");
  const uint64_t lookups = resolver_->registry_lookups();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(served_by("s"), "a");
  EXPECT_EQ(resolver_->registry_lookups(), lookups) << "cached: no registry query";

  // Another connection takes SQLite's write lock; a scenario write then waits
  // on it (busy timeout) holding the registry, and a route read from there
  // would wait with it.
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/registry.db").c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  auto repoint = std::async(std::launch::async, [this] {
    return admin(http::verb::put, "/admin/scenarios/s", {{"adapter", "b"}}).status;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the write waits on the lock
  const auto start = Clock::now();
  EXPECT_EQ(served_by("s"), "a");
  const double cached_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  EXPECT_LT(cached_ms, 2000) << "a cached route waited for the registry";
  EXPECT_EQ(repoint.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout) << "the write was not held";

  ASSERT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(other);
  EXPECT_EQ(repoint.get(), 200);
  EXPECT_EQ(served_by("s"), "b") << "the write reloaded the routes";
}

}  // namespace
}  // namespace loragate::testing
