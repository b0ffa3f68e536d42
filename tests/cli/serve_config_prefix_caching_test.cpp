// engine.prefix_caching: read from YAML (default true, as configs/loragate.yaml
// documents it; a wrong type names the key), overridden by `serve
// --prefix-caching` / `--no-prefix-caching` (never both), and
// `loragate admin prefix-cache reset [--base NAME]` against a running server.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli/serve_config.h"
#include "tests/cli/cli_runner.h"
#include "tests/serve/server_process.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

TEST(ServeConfigPrefixCachingTest, KeyDefaultsToOnAndNamesItselfInErrors) {
  auto example = ServeConfig::load(std::string(LORAGATE_SOURCE_DIR) + "/configs/loragate.yaml");
  ASSERT_TRUE(example.is_ok()) << example.status().to_string();
  EXPECT_TRUE(example->engine.prefix_caching);
  EXPECT_EQ(example->engine.prefix_caching, EngineOptions{}.prefix_caching);

  auto absent = ServeConfig::parse("engine: {max_num_seqs: 8}\n", "test.yaml");
  ASSERT_TRUE(absent.is_ok()) << absent.status().to_string();
  EXPECT_TRUE(absent->engine.prefix_caching);
  auto off = ServeConfig::parse("engine: {prefix_caching: false}\n", "test.yaml");
  ASSERT_TRUE(off.is_ok()) << off.status().to_string();
  EXPECT_FALSE(off->engine.prefix_caching);
  auto on = ServeConfig::parse("engine:\n  prefix_caching: true\n", "test.yaml");
  ASSERT_TRUE(on.is_ok()) << on.status().to_string();
  EXPECT_TRUE(on->engine.prefix_caching);

  for (const char* bad : {"engine: {prefix_caching: sometimes}\n", "engine: {prefix_caching: [true]}\n",
                          "engine: {prefix_caching: {on: 1}}\n", "engine: {prefix_caching: 2}\n"}) {
    auto r = ServeConfig::parse(bad, "bad.yaml");
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("engine.prefix_caching"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("bad.yaml"), std::string::npos) << r.status().message();
  }
}

TEST(ServeConfigPrefixCachingTest, TheTwoFlagsExcludeEachOther) {
  CliRun r = run_cli("serve --prefix-caching --no-prefix-caching --port 0");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("excludes"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("loragate: serving"), std::string::npos) << r.out;
}

// A real server on stories260K: the flags override the key (the start-up line
// says which applies), and the admin CLI resets its cache.
class ServePrefixCachingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
    dir_ = testing::make_temp_dir("lg-serve-prefix-caching");
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // A config serving stories260K as "stories" with engine.prefix_caching = `caching`.
  std::string config(bool caching) const {
    const std::string path = dir_ + (caching ? "/on.yaml" : "/off.yaml");
    std::ofstream(path) << "model: {path: " << testing::shared_dir() << "/models/stories260K, served_name: stories}\n"
                        << "adapters: {registry: " << dir_ << "/registry.db}\n"
                        << "engine: {prefix_caching: " << (caching ? "true" : "false") << "}\n";
    return path;
  }

  // The start-up line's prefix-caching state of `serve ARGS`: "on", "off", or "" when it did not serve.
  std::string caching_state(const std::vector<std::string>& args) const {
    testing::ServerProcess server;
    if (server.start(args).empty()) {
      ADD_FAILURE() << server.output();
      return "";
    }
    const std::string out = server.output();
    EXPECT_EQ(server.stop(), 0) << out;
    if (out.find("prefix caching on") != std::string::npos) return "on";
    if (out.find("prefix caching off") != std::string::npos) return "off";
    ADD_FAILURE() << "the start-up line says nothing of prefix caching: " << out;
    return "";
  }

  std::string dir_;
};

TEST_F(ServePrefixCachingTest, FlagsOverrideTheKey) {
  EXPECT_EQ(caching_state({"--config", config(true)}), "on");
  EXPECT_EQ(caching_state({"--config", config(false)}), "off");
  EXPECT_EQ(caching_state({"--config", config(false), "--prefix-caching"}), "on");
  EXPECT_EQ(caching_state({"--config", config(true), "--no-prefix-caching"}), "off");
}

TEST_F(ServePrefixCachingTest, AdminCliResetsThePrefixCache) {
  const std::string token = "prefix-cache-token";
  testing::ServerProcess server;
  const std::string url = server.start({"--config", config(true), "--admin-token", token});
  ASSERT_FALSE(url.empty()) << server.output();
  const std::string at = " --url " + url;

  CliRun all = run_cli("admin prefix-cache reset" + at + " --token " + token);
  EXPECT_EQ(all.exit_code, 0) << all.out;
  EXPECT_NE(all.out.find("reset the prefix cache of stories"), std::string::npos) << all.out;

  CliRun one = run_cli("admin prefix-cache reset --base stories --json" + at + " --token " + token);
  EXPECT_EQ(one.exit_code, 0) << one.out;
  EXPECT_NE(one.out.find("\"reset\""), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("\"stories\""), std::string::npos) << one.out;

  CliRun unknown = run_cli("admin prefix-cache reset --base nope" + at + " --token " + token);
  EXPECT_NE(unknown.exit_code, 0) << unknown.out;
  EXPECT_NE(unknown.out.find("nope"), std::string::npos) << unknown.out;

  CliRun no_token = run_cli("admin prefix-cache reset" + at + " --token ''");
  EXPECT_NE(no_token.exit_code, 0) << no_token.out;
  EXPECT_NE(no_token.out.find("--token"), std::string::npos) << no_token.out;
  EXPECT_EQ(server.stop(), 0) << server.output();
}

}  // namespace
}  // namespace loragate
