// ServeConfig: the example config parses, every key is validated by name.
#include "cli/serve_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace loragate {
namespace {

TEST(ServeConfigTest, ExampleConfigParsesToTheDefaults) {
  auto c = ServeConfig::load(std::string(LORAGATE_SOURCE_DIR) + "/configs/loragate.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  ServeConfig defaults;
  EXPECT_EQ(c->server.port, defaults.server.port);
  EXPECT_EQ(c->server.max_body_bytes, defaults.server.max_body_bytes);
  EXPECT_EQ(c->engine.max_loras, defaults.engine.max_loras);
  EXPECT_EQ(c->engine.kv_cache_bytes, defaults.engine.kv_cache_bytes);
  EXPECT_EQ(c->registry_path, defaults.registry_path);
  EXPECT_TRUE(c->model_path.empty());
}

TEST(ServeConfigTest, BaseGenerationKeys) {
  auto c = ServeConfig::parse(R"(
model: {path: /models/llama/v1}
engine: {candidate_share: 0.5, memory_budget_mib: 4096, max_logits_rows: 64}
bases: {roots: [/models/candidates]}
)", "test.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->candidate_share, 0.5);
  EXPECT_EQ(c->resolved_memory_budget_bytes(), 4096ll << 20);
  EXPECT_EQ(c->engine.max_logits_rows, 64);
  EXPECT_EQ(c->resolved_base_roots(), std::vector<std::string>{"/models/candidates"});

  auto defaults = ServeConfig::parse("model: {path: /models/llama/v1/}\n", "test.yaml");
  ASSERT_TRUE(defaults.is_ok());
  EXPECT_EQ(defaults->resolved_base_roots(), std::vector<std::string>{"/models/llama"}) << "the model's directory";
  EXPECT_GT(defaults->resolved_memory_budget_bytes(), 0) << "80% of this machine's memory";

  for (const char* bad : {"engine: {candidate_share: 1.5}", "engine: {memory_budget_mib: -1}",
                          "engine: {max_logits_rows: 0}", "bases: {root: [/x]}"}) {
    auto r = ServeConfig::parse(bad, "bad.yaml");
    EXPECT_FALSE(r.is_ok()) << bad;
  }
  auto r = ServeConfig::parse("engine: {candidate_share: 2}", "bad.yaml");
  EXPECT_NE(r.status().message().find("engine.candidate_share"), std::string::npos) << r.status().message();
}

TEST(ServeConfigTest, TrainingKeys) {
  auto c = ServeConfig::parse(R"(
adapters: {registry: /srv/loragate/registry.db}
training: {roots: [/srv/data, /srv/more], dir: /srv/trained}
)", "test.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->training_roots, (std::vector<std::string>{"/srv/data", "/srv/more"}));
  EXPECT_EQ(c->resolved_training_dir(), "/srv/trained");
  auto defaults = ServeConfig::parse("adapters: {registry: /srv/loragate/registry.db}\n", "test.yaml");
  ASSERT_TRUE(defaults.is_ok());
  EXPECT_TRUE(defaults->training_roots.empty());
  EXPECT_EQ(defaults->resolved_training_dir(), "/srv/loragate/trained") << "beside the registry";
  auto r = ServeConfig::parse("training: {root: [/x]}", "bad.yaml");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("training.root"), std::string::npos) << r.status().message();
}

// Found by the serve_config fuzz target: a key that is itself a map threw
// out of the parser and killed `loragate serve --config`.
TEST(ServeConfigTest, CollectionKeysAreAnErrorNotACrash) {
  for (const char* bad : {"? {max_loras: 4}\n: 1\n", "engine:\n  ? [a, b]\n  : 1\n", "scenarios:\n  ? {x: 1}\n  : a\n"}) {
    auto r = ServeConfig::parse(bad, "bad.yaml");
    EXPECT_FALSE(r.is_ok()) << bad;
  }
}

TEST(ServeConfigTest, ReadsEverySection) {
  auto c = ServeConfig::parse(R"(
server: {host: 0.0.0.0, port: 9001, read_timeout_ms: 250}
model: {path: /models/x, served_name: x, dtype: bf16, device: "cuda:1"}
engine: {max_loras: 12, kv_cache_mib: 64}
adapters:
  roots: [/srv/a, /srv/b]
  preload: [{name: one, path: /srv/a/one}]
scenarios: {support: one}
auth: {admin_token: s3cret}
)", "test.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->server.host, "0.0.0.0");
  EXPECT_EQ(c->server.port, 9001);
  EXPECT_EQ(c->server.read_timeout.count(), 250);
  EXPECT_EQ(c->engine.weight_dtype, WeightType::kBF16);
  EXPECT_EQ(c->engine.device, (Device{Device::Kind::kCuda, 1}));
  EXPECT_EQ(c->engine.max_loras, 12);
  EXPECT_EQ(c->engine.kv_cache_bytes, 64ll << 20);
  ASSERT_EQ(c->adapter_roots.size(), 2u);
  ASSERT_EQ(c->preload.size(), 1u);
  EXPECT_EQ(c->preload[0].path, "/srv/a/one");
  EXPECT_EQ(c->scenarios.at("support"), "one");
  EXPECT_EQ(c->resolved_admin_token(), "s3cret");
}

TEST(ServeConfigTest, ErrorsNameTheKey) {
  struct Case {
    const char* yaml;
    const char* expect;
  };
  for (const Case& k : {Case{"server: {prot: 1}", "server.prot: unknown key"},
                        Case{"server: {port: 70000}", "server.port: 70000 is outside"},
                        Case{"engine: {max_loras: many}", "engine.max_loras: wrong type"},
                        Case{"model: {dtype: f8}", "model.dtype must be one of f32, bf16, int8, int8-outlier, int4"},
                        Case{"model: {device: gpu}", "model.device 'gpu' is not one of cpu, cuda, cuda:N"},
                        Case{"model: {outlier_threshold: -1}", "model.outlier_threshold must be > 0"},
                        Case{"colour: blue", "colour: unknown key"},
                        Case{"adapters: {preload: [{name: x}]}", "adapters.preload[0] needs name and path"},
                        Case{"server: [1, 2]", "server: must be a mapping"},
                        Case{"server: {port: 1", "invalid YAML"}}) {
    auto c = ServeConfig::parse(k.yaml, "bad.yaml");
    ASSERT_FALSE(c.is_ok()) << k.yaml;
    EXPECT_NE(c.status().message().find(k.expect), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("bad.yaml"), std::string::npos) << c.status().message();
  }
}

TEST(ServeConfigTest, AdminTokenFromTheEnvironment) {
  ServeConfig c;
  c.admin_token_env = "LORAGATE_TEST_TOKEN_VAR";
  setenv("LORAGATE_TEST_TOKEN_VAR", "from-env", 1);
  EXPECT_EQ(c.resolved_admin_token(), "from-env");
  unsetenv("LORAGATE_TEST_TOKEN_VAR");
  EXPECT_EQ(c.resolved_admin_token(), "");
}

}  // namespace
}  // namespace loragate
