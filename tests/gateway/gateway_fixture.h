// The fixture of the gateway tests: one BaseSet serving the synthetic stand-in
// for stories260K (synth_fixtures.h; adapters a, b, c registered) shared by
// the suite, and a fresh Gateway on an ephemeral loopback port per test.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "bases/base_set.h"
#include "gateway/gateway.h"
#include "tests/gateway/http_test_client.h"
#include "tests/gateway/synth_fixtures.h"
#include "tests/test_util.h"

namespace loragate::testing {

inline constexpr const char* kServed = "stories";
inline constexpr const char* kGoldenPrompt = "Once upon a time";

class GatewayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    BaseSetOptions o;
    o.engine.max_loras = 4;
    bases_ = new BaseSet(o, /*registry=*/nullptr);
    Status served = bases_->start_serving({kServed, gateway_fixture_dir() + "/models/stories260K", WeightType::kF32}, "test");
    ASSERT_TRUE(served.is_ok()) << served.to_string();
    for (const char* name : {"a", "b", "c"}) {
      Status s = bases_->serving()->adapters()->add(name, gateway_fixture_dir() + "/models/stories260K-lora/" + name);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
    }
    loop_ = &bases_->serving()->loop();
    std::ifstream in(gateway_fixture_dir() + "/models/golden.json");
    golden_ = new nlohmann::json(nlohmann::json::parse(in));
  }
  static void TearDownTestSuite() {
    loop_ = nullptr;
    delete bases_;
    bases_ = nullptr;
    delete golden_;
    golden_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(loop_, nullptr);
    ServerOptions server;
    server.port = 0;
    server.read_timeout = std::chrono::milliseconds(300);
    server.idle_timeout = std::chrono::milliseconds(2000);
    server.max_body_bytes = 64u << 10;
    start(server);
  }
  void TearDown() override { gateway_.reset(); }

  // (Re)starts the gateway with these server options.
  void start(const ServerOptions& server) {
    gateway_.reset();
    GatewayOptions options;
    options.server = server;
    options.served_model_name = kServed;
    options.log_requests = log_requests_;
    auto gw = Gateway::create(options, bases_, &resolver_);
    ASSERT_TRUE(gw.is_ok()) << gw.status().to_string();
    gateway_ = std::move(gw).value();
    if (observer_ != nullptr) gateway_->set_observer(observer_);
    auto port = gateway_->start();
    ASSERT_TRUE(port.is_ok()) << port.status().to_string();
    port_ = port.value();
  }

  // Golden continuation of case 0 for "base", "a", "b" or "c".
  static std::string golden_text(const std::string& which) {
    return (*golden_)["cases"][0]["outputs"][which]["continuation_text"].get<std::string>();
  }

  static nlohmann::json greedy(const std::string& model, int max_tokens = 48) {
    return {{"model", model}, {"prompt", kGoldenPrompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
  }

  ClientResponse post(const std::string& target, const nlohmann::json& body,
                      const std::map<std::string, std::string>& headers = {}) {
    return post_json(port_, target, body, headers);
  }

  // Polls the engine until nothing runs and no KV block is used.
  static bool engine_drained(std::chrono::milliseconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    for (;;) {
      const EngineStats s = loop_->stats();
      if (s.running == 0 && s.waiting == 0 && s.kv_blocks_used == 0) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  static inline BaseSet* bases_ = nullptr;
  static inline EngineLoop* loop_ = nullptr;  // the serving base's
  static inline nlohmann::json* golden_ = nullptr;
  InMemoryModelResolver resolver_;
  RequestObserver* observer_ = nullptr;
  bool log_requests_ = false;
  std::unique_ptr<Gateway> gateway_;
  uint16_t port_ = 0;
};

}  // namespace loragate::testing
