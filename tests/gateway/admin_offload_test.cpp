// Admin work off the network threads: while a large adapter loads and
// hashes, other connections (/health) are answered at once.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "adapters/lora_module.h"
#include "model/model_config.h"
#include "tests/adapters/adapter_fixtures.h"
#include "tests/gateway/admin_fixture.h"

namespace loragate::testing {
namespace {

using nlohmann::json;

// Serves adapters of rank up to 1024, so that one can be tens of megabytes.
class LargeAdapterTest : public AdminGatewayTest {
 protected:
  static constexpr int64_t kRank = 1024;
  void SetUp() override {
    max_lora_rank_ = kRank;
    AdminGatewayTest::SetUp();
  }
};

// /health on a held connection, every few milliseconds, while `busy` holds;
// the slowest answer in ms (-1 when one failed).
class HealthProbe {
 public:
  explicit HealthProbe(uint16_t port) : thread_([this, port] { run(port); }) {}
  ~HealthProbe() { stop(); }
  void stop() {
    busy_ = false;
    if (thread_.joinable()) thread_.join();
  }
  double worst_ms() const { return worst_ms_; }
  int probes() const { return probes_; }

 private:
  void run(uint16_t port) {
    TestConnection conn(port);
    if (!conn.connected()) {
      worst_ms_ = -1;
      return;
    }
    while (busy_) {
      const auto start = Clock::now();
      ClientResponse r = conn.call(http::verb::get, "/health");
      if (r.status != 200) {
        worst_ms_ = -1;
        return;
      }
      worst_ms_ = std::max(worst_ms_, ms_since(start));
      ++probes_;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  std::atomic<bool> busy_{true};
  double worst_ms_ = 0;  // read after stop()
  int probes_ = 0;
  std::thread thread_;
};

TEST_F(LargeAdapterTest, HealthAnswersWhileALargeAdapterRegisters) {
  LG_REQUIRE_STORIES260K();  // its size
  // Every module of every layer at rank 1024: about 24 MB to read, validate and hash.
  Result<ModelConfig> base = ModelConfig::load(model_dir());
  ASSERT_TRUE(base.is_ok()) << base.status().to_string();
  const std::string big = dir_ + "/adapters/big";
  std::filesystem::create_directories(big);
  const std::vector<LoraModule> modules(kAllLoraModules.begin(), kAllLoraModules.end());
  ASSERT_TRUE(write_adapter(big,
                            lora_config(kRank, 2.0 * kRank,
                                        {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}),
                            fake_adapter(*base, modules, kRank))
                  .is_ok());
  ASSERT_GT(std::filesystem::file_size(big + "/adapter_model.safetensors"), 16u << 20);

  HealthProbe probe(port_);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the probe's connection is up
  const auto start = Clock::now();
  ClientResponse added = admin(http::verb::post, "/admin/adapters", {{"name", "big"}, {"path", big}});
  const double registration_ms = ms_since(start);
  probe.stop();

  ASSERT_EQ(added.status, 201) << added.body;
  EXPECT_EQ(added.json()["rank"], kRank);
  ASSERT_GE(probe.worst_ms(), 0) << "a /health probe failed";
  ASSERT_GT(probe.probes(), 0);
  // On the network thread the registration held /health for about its whole duration.
  EXPECT_LT(probe.worst_ms(), registration_ms / 4)
      << "registration took " << registration_ms << " ms; the slowest of " << probe.probes() << " /health probes "
      << probe.worst_ms() << " ms";
}

TEST_F(AdminGatewayTest, AdminRoutesAnswerAfterTheirWorkMovesOffTheStrand) {
  ClientResponse added = admin(http::verb::post, "/admin/adapters", {{"name", "a"}, {"path", lora_dir("a")}});
  ASSERT_EQ(added.status, 201) << added.body;
  EXPECT_EQ(added.json()["base_model"], "stories");
  ClientResponse listed = admin(http::verb::get, "/admin/adapters");
  ASSERT_EQ(listed.status, 200) << listed.body;
  ASSERT_EQ(listed.json()["data"].size(), 1u);
  EXPECT_EQ(admin(http::verb::put, "/admin/scenarios/s", {{"adapter", "a"}}).status, 200);
  EXPECT_EQ(admin(http::verb::get, "/admin/scenarios").json()["data"][0]["adapter"], "a");
  EXPECT_EQ(admin(http::verb::delete_, "/admin/adapters/a").status, 409) << "scenario s uses it";
  EXPECT_EQ(admin(http::verb::delete_, "/admin/scenarios/s").status, 200);
  EXPECT_EQ(admin(http::verb::delete_, "/admin/adapters/a").status, 200);
  EXPECT_EQ(admin(http::verb::delete_, "/admin/adapters/a").status, 404);
  ClientResponse bases = admin(http::verb::get, "/admin/bases");
  ASSERT_EQ(bases.status, 200) << bases.body;
  EXPECT_EQ(bases.json()["data"][0]["name"], "stories");
  EXPECT_EQ(admin(http::verb::post, "/admin/bases/rollback", json::object()).status, 409) << "nothing to roll back to";
}

}  // namespace
}  // namespace loragate::testing
