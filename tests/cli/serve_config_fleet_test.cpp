// fleet.*: defaults as documented in configs/loragate.yaml, auto = a
// postgresql:// registry, bad values refused naming the key.
#include <gtest/gtest.h>

#include "cli/serve_config.h"

namespace loragate {
namespace {

TEST(ServeConfigFleetTest, DefaultsAutoModeAndRefusals) {
  auto example = ServeConfig::load(std::string(LORAGATE_SOURCE_DIR) + "/configs/loragate.yaml");
  ASSERT_TRUE(example.is_ok()) << example.status().to_string();
  const ServeConfig defaults;
  EXPECT_EQ(example->fleet_enabled, defaults.fleet_enabled);
  EXPECT_EQ(example->fleet_heartbeat_ms, defaults.fleet_heartbeat_ms);
  EXPECT_EQ(example->fleet_max_unavailable, defaults.fleet_max_unavailable);
  EXPECT_FALSE(example->is_fleet_replica()) << "a SQLite registry is a lone server by default";

  auto pg = ServeConfig::parse("adapters: {registry: 'postgresql://lg@db/loragate'}\n", "pg.yaml");
  ASSERT_TRUE(pg.is_ok()) << pg.status().to_string();
  EXPECT_TRUE(pg->is_fleet_replica());
  auto off = ServeConfig::parse("adapters: {registry: 'postgres://db/x'}\nfleet: {enabled: false}\n", "off.yaml");
  ASSERT_TRUE(off.is_ok());
  EXPECT_FALSE(off->is_fleet_replica());
  auto on = ServeConfig::parse("fleet: {enabled: true, url: 'http://10.0.0.5:8000', max_unavailable: 2}\n", "on.yaml");
  ASSERT_TRUE(on.is_ok()) << on.status().to_string();
  EXPECT_TRUE(on->is_fleet_replica());
  EXPECT_EQ(on->fleet_url, "http://10.0.0.5:8000");
  EXPECT_EQ(on->fleet_max_unavailable, 2);

  auto maybe = ServeConfig::parse("fleet: {enabled: maybe}\n", "bad.yaml");
  EXPECT_NE(maybe.status().message().find("fleet.enabled"), std::string::npos) << maybe.status().message();
  auto none = ServeConfig::parse("fleet: {max_unavailable: 0}\n", "bad.yaml");
  EXPECT_NE(none.status().message().find("max_unavailable"), std::string::npos) << none.status().message();
  auto order = ServeConfig::parse("fleet: {heartbeat_ms: 5000, lost_after_ms: 4000}\n", "bad.yaml");
  EXPECT_NE(order.status().message().find("lost_after_ms"), std::string::npos) << order.status().message();
  auto typo = ServeConfig::parse("fleet: {heartbeat: 5}\n", "bad.yaml");
  EXPECT_NE(typo.status().message().find("heartbeat"), std::string::npos) << typo.status().message();
}

}  // namespace
}  // namespace loragate
