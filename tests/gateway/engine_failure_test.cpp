// A serving base whose engine step fails: its requests get 500 (an OpenAI
// server_error, no Retry-After: it is not a shutdown) and /ready turns 503
// naming the base.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bases/base_set.h"
#include "gateway/gateway.h"
#include "tests/engine/failing_runner.h"
#include "tests/gateway/http_test_client.h"
#include "tests/gateway/synth_fixtures.h"
#include "tests/test_util.h"

namespace loragate::testing {
namespace {

TEST(GatewayEngineFailureTest, AFailedStepAnswers500AndReadyTurns503NamingTheBase) {
  auto faults = std::make_shared<RunnerFaults>();
  faults->forwards_before_failing = 0;  // a sticky device error
  BaseSetOptions o;
  o.engine.runner_factory = failing_runner_factory(faults);
  BaseSet bases(o, /*registry=*/nullptr);
  Status served = bases.start_serving({"broken", gateway_fixture_dir() + "/models/stories260K", WeightType::kF32}, "test");
  ASSERT_TRUE(served.is_ok()) << served.to_string();
  InMemoryModelResolver resolver;
  GatewayOptions g;
  g.server.port = 0;
  g.served_model_name = "broken";
  g.log_requests = false;
  auto gw = Gateway::create(g, &bases, &resolver);
  ASSERT_TRUE(gw.is_ok()) << gw.status().to_string();
  auto port = (*gw)->start();
  ASSERT_TRUE(port.is_ok()) << port.status().to_string();

  EXPECT_EQ(http_call(*port, http::verb::get, "/ready").status, 200);
  const nlohmann::json chat = {{"model", "broken"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                               {"max_tokens", 4}};
  for (int i = 0; i < 2; ++i) {
    ClientResponse r = post_json(*port, "/v1/chat/completions", chat);
    ASSERT_EQ(r.status, 500) << r.body;
    EXPECT_EQ(r.headers.count("Retry-After"), 0u) << "an engine failure is not a shutdown";
    const nlohmann::json body = nlohmann::json::parse(r.body);
    EXPECT_EQ(body["error"]["type"], "server_error") << r.body;
    EXPECT_NE(body["error"]["message"].get<std::string>().find("illegal memory access"), std::string::npos) << r.body;
  }
  ClientResponse ready = http_call(*port, http::verb::get, "/ready");
  EXPECT_EQ(ready.status, 503) << ready.body;
  EXPECT_NE(ready.body.find("unhealthy"), std::string::npos) << ready.body;
  EXPECT_NE(ready.body.find("broken"), std::string::npos) << ready.body;
  EXPECT_FALSE((*gw)->ready());
}

}  // namespace
}  // namespace loragate::testing
