// The fixture of the admin gateway tests: per test, a SQLite registry file in
// a fresh directory, a BaseSet recording into it and serving stories260K (the
// synthetic stand-in, synth_fixtures.h), the RegistryModelResolver (routes in
// memory), and a Gateway with the AdminApi on
// an ephemeral loopback port — as `loragate serve` wires them — with one
// network thread, so that work blocking it shows at once.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "bases/base_set.h"
#include "gateway/admin/admin_api.h"
#include "gateway/gateway.h"
#include "gateway/registry_resolver.h"
#include "registry/registry.h"
#include "tests/gateway/http_test_client.h"
#include "tests/gateway/synth_fixtures.h"
#include "tests/test_util.h"

namespace loragate::testing {

inline constexpr const char* kAdminToken = "test-admin-token";

using Clock = std::chrono::steady_clock;
inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

class AdminGatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("lg-admin-gateway");
    std::filesystem::create_directories(dir_ + "/adapters");
    auto registry = Registry::open(dir_ + "/registry.db");
    ASSERT_TRUE(registry.is_ok()) << registry.status().to_string();
    registry_ = std::move(registry).value();
    BaseSetOptions o;
    o.engine.max_loras = 4;
    o.engine.max_lora_rank = max_lora_rank_;
    bases_ = std::make_unique<BaseSet>(o, registry_.get());
    Status served = bases_->start_serving({"stories", model_dir(), WeightType::kF32}, "test");
    ASSERT_TRUE(served.is_ok()) << served.to_string();
    auto resolver = RegistryModelResolver::create(registry_.get());
    ASSERT_TRUE(resolver.is_ok()) << resolver.status().to_string();
    resolver_ = std::move(resolver).value();
    AdminOptions admin;
    admin.token = kAdminToken;
    admin.adapter_roots = {dir_ + "/adapters", gateway_fixture_dir() + "/models/stories260K-lora"};
    admin.base_roots = {gateway_fixture_dir() + "/models"};
    admin.served_name = "stories";
    admin_ = std::make_unique<AdminApi>(admin, registry_.get(), bases_.get(), nullptr);
    admin_->set_route_cache(resolver_.get());

    GatewayOptions options;
    options.server.port = 0;
    options.server.io_threads = 1;
    options.server.max_body_bytes = 4u << 20;
    options.served_model_name = "stories";
    options.admin_token = kAdminToken;
    options.log_requests = false;
    auto gw = Gateway::create(options, bases_.get(), resolver_.get());
    ASSERT_TRUE(gw.is_ok()) << gw.status().to_string();
    gateway_ = std::move(gw).value();
    admin_->install(gateway_->router(), gateway_->blocking_work());
    auto port = gateway_->start();
    ASSERT_TRUE(port.is_ok()) << port.status().to_string();
    port_ = port.value();
  }

  void TearDown() override {
    gateway_.reset();
    admin_.reset();
    resolver_.reset();
    bases_.reset();
    registry_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // The model the BaseSet serves; fixtures may point at another copy.
  virtual std::string model_dir() const { return gateway_fixture_dir() + "/models/stories260K"; }

  // An admin call on a fresh connection.
  ClientResponse admin(http::verb method, const std::string& target, const nlohmann::json& body = nullptr) {
    return http_call(port_, method, target, body.is_null() ? "" : body.dump(),
                     {{"Authorization", std::string("Bearer ") + kAdminToken}});
  }

  static std::string lora_dir(const std::string& name) {
    return gateway_fixture_dir() + "/models/stories260K-lora/" + name;
  }

  // Polls GET /admin/bases until base `name` is in `state`.
  bool wait_for_base(const std::string& name, const std::string& state, std::chrono::seconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < deadline) {
      const nlohmann::json listed = admin(http::verb::get, "/admin/bases").json();
      for (const nlohmann::json& b : listed["data"]) {
        if (b["name"] == name && b["state"] == state) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  int32_t max_lora_rank_ = 16;  // set before SetUp() to serve larger adapters
  std::string dir_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<BaseSet> bases_;
  std::unique_ptr<RegistryModelResolver> resolver_;
  std::unique_ptr<AdminApi> admin_;
  std::unique_ptr<Gateway> gateway_;
  uint16_t port_ = 0;
};

}  // namespace loragate::testing
