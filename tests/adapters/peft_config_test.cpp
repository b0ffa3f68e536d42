// PeftConfig: parsing adapter_config.json, refusing what we cannot serve by
// name, and PEFT's targeting, rank_pattern / alpha_pattern and scaling rules.
#include "adapters/peft_config.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "tests/adapters/adapter_fixtures.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

#define EXPECT_MSG_HAS(status, text) \
  EXPECT_NE((status).message().find(text), std::string::npos) << (status).to_string()

Result<PeftConfig> parse(const json& j) { return PeftConfig::parse(j.dump(), "test/adapter_config.json"); }

json base_json() { return testing::lora_config(8, 16, {"q_proj", "v_proj"}); }

// Which (layer, module) pairs of a 4-layer model the config targets, as "L.name" words.
std::string targets_of(const PeftConfig& c, int64_t layers = 4) {
  std::string out;
  for (int64_t l = 0; l < layers; ++l) {
    for (LoraModule m : kAllLoraModules) {
      if (!c.target(l, m)) continue;
      if (!out.empty()) out += " ";
      out += std::to_string(l);
      out += '.';
      out += lora_module_name(m);
    }
  }
  return out;
}

TEST(PeftConfigTest, ParsesATypicalConfig) {
  auto c = parse(base_json());
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->r(), 8);
  EXPECT_EQ(c->lora_alpha(), 16);
  EXPECT_FALSE(c->use_rslora());
  EXPECT_EQ(c->base_model_name_or_path(), "tiny");
  EXPECT_EQ(targets_of(*c, 2), "0.q_proj 0.v_proj 1.q_proj 1.v_proj");
  auto t = c->target(1, LoraModule::kV);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->rank, 8);
  EXPECT_EQ(t->alpha, 16);
  EXPECT_FLOAT_EQ(t->scaling, 2.0f);
  EXPECT_FALSE(c->target(0, LoraModule::kK).has_value());
}

TEST(PeftConfigTest, PeftDefaultsForRAndAlpha) {
  auto c = parse(json{{"peft_type", "LORA"}, {"target_modules", {"q_proj"}}});
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->r(), 8);
  EXPECT_EQ(c->lora_alpha(), 8);
  EXPECT_FLOAT_EQ(c->target(0, LoraModule::kQ)->scaling, 1.0f);
}

TEST(PeftConfigTest, IgnoresTrainingOnlyAndUnknownKeys) {
  json j = base_json();
  j["lora_dropout"] = 0.1;
  j["init_lora_weights"] = "gaussian";
  j["auto_mapping"] = {{"base_model_class", "LlamaForCausalLM"}};
  j["megatron_config"] = nullptr;
  j["loftq_config"] = json::object();
  j["some_future_key"] = {1, 2, 3};
  j["modules_to_save"] = json::array();  // empty is fine
  j["layers_pattern"] = "h";             // ignored without layers_to_transform
  auto c = parse(j);
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
}

TEST(PeftConfigTest, RsloraScalesBySqrtR) {
  json j = testing::lora_config(16, 8, {"q_proj"});
  j["use_rslora"] = true;
  auto c = parse(j);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_TRUE(c->use_rslora());
  EXPECT_FLOAT_EQ(c->target(0, LoraModule::kQ)->scaling, 2.0f);  // 8 / sqrt(16)
  EXPECT_FLOAT_EQ(c->scaling_for(4, 8), 4.0f);
  j["use_rslora"] = false;
  EXPECT_FLOAT_EQ(parse(j)->target(0, LoraModule::kQ)->scaling, 0.5f);
}

TEST(PeftConfigTest, FloatAlpha) {
  json j = testing::lora_config(4, 6.5, {"q_proj"});
  EXPECT_FLOAT_EQ(parse(j)->target(0, LoraModule::kQ)->scaling, 6.5f / 4);
}

TEST(PeftConfigTest, TargetListMatchesPathSuffixes) {
  auto c = parse(testing::lora_config(8, 8, {"self_attn.o_proj", "mlp.down_proj"}));
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(targets_of(*c, 2), "0.o_proj 0.down_proj 1.o_proj 1.down_proj");
  // A full path names one module of one layer.
  c = parse(testing::lora_config(8, 8, {"model.layers.1.self_attn.k_proj"}));
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(targets_of(*c), "1.k_proj");
}

TEST(PeftConfigTest, AllLinearAndPlainStringTargets) {
  json j = base_json();
  j["target_modules"] = "all-linear";
  auto c = parse(j);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(targets_of(*c, 1), "0.q_proj 0.k_proj 0.v_proj 0.o_proj 0.gate_proj 0.up_proj 0.down_proj");
  j["target_modules"] = "up_proj";
  c = parse(j);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(targets_of(*c, 2), "0.up_proj 1.up_proj");
}

// Found by the peft_config fuzz target: a nested repeat took > 10 s per
// module with a backtracking matcher, and a huge back-reference number
// overflowed inside the regex compiler.
TEST(PeftConfigTest, HostileRegexTargetsNeitherHangNorOverflow) {
  json j = base_json();
  j["target_modules"] = R"(.**\.(q|k)_proj)";
  const auto t0 = std::chrono::steady_clock::now();
  auto c = parse(j);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  (void)targets_of(*c);  // match every module path
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 2.0) << "a nested repeat must not backtrack exponentially";
  j["target_modules"] = R"(\88888888888888888888888)";
  c = parse(j);
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("more than 9 digits"), std::string::npos) << c.status().to_string();
}

TEST(PeftConfigTest, RegexTargetMustFullyMatchTheModulePath) {
  json j = base_json();
  j["target_modules"] = R"(.*\.layers\.[13]\.self_attn\.(q|v)_proj)";
  auto c = parse(j);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(targets_of(*c), "1.q_proj 1.v_proj 3.q_proj 3.v_proj");
  // Full match: a pattern matching only part of the path selects nothing.
  j["target_modules"] = R"(layers\.1.*)";
  c = parse(j);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(targets_of(*c), "");
  // PEFT does not apply layers_to_transform to a regex.
  j["target_modules"] = R"(.*mlp\.(gate|up)_proj)";
  j["layers_to_transform"] = {0};
  c = parse(j);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(targets_of(*c, 2), "0.gate_proj 0.up_proj 1.gate_proj 1.up_proj");
}

TEST(PeftConfigTest, RegexTargetRefusedWhenItMatchesTheHead) {
  json j = base_json();
  j["target_modules"] = ".*";
  auto c = parse(j);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnsupported);
  EXPECT_MSG_HAS(c.status(), "target_modules");
  EXPECT_MSG_HAS(c.status(), "model.embed_tokens");
}

TEST(PeftConfigTest, InvalidRegexIsNamed) {
  json j = base_json();
  j["target_modules"] = "model.layers.(0.q_proj";
  auto c = parse(j);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_MSG_HAS(c.status(), "target_modules");
  EXPECT_MSG_HAS(c.status(), "model.layers.(0.q_proj");
}

TEST(PeftConfigTest, LayersToTransformIntAndList) {
  json j = testing::lora_config(8, 8, {"q_proj", "down_proj"});
  j["layers_to_transform"] = 2;
  j["layers_pattern"] = "layers";
  auto c = parse(j);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(targets_of(*c), "2.q_proj 2.down_proj");
  j["layers_to_transform"] = {3, 0, 3};
  j["layers_pattern"] = {"layers"};
  c = parse(j);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(targets_of(*c), "0.q_proj 0.down_proj 3.q_proj 3.down_proj");
  EXPECT_EQ(c->layers_to_transform(), (std::vector<int64_t>{0, 3}));
  j["layers_to_transform"] = json::array();  // empty = every layer
  EXPECT_EQ(targets_of(*parse(j), 2), "0.q_proj 0.down_proj 1.q_proj 1.down_proj");
}

TEST(PeftConfigTest, LayersToTransformErrors) {
  json j = base_json();
  j["layers_to_transform"] = {0, -1};
  auto c = parse(j);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_MSG_HAS(c.status(), "layers_to_transform");
  j["layers_to_transform"] = "0";
  EXPECT_EQ(parse(j).status().code(), StatusCode::kInvalidArgument);
  j["layers_to_transform"] = {1};
  j["layers_pattern"] = "h";
  c = parse(j);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnsupported);
  EXPECT_MSG_HAS(c.status(), "layers_pattern");
}

TEST(PeftConfigTest, RankAndAlphaPatterns) {
  // Raw text: the first matching key in file order wins, as in PEFT.
  const std::string text = R"({
    "peft_type": "LORA", "r": 8, "lora_alpha": 16,
    "target_modules": ["q_proj", "v_proj", "down_proj"],
    "rank_pattern": {"model.layers.1.self_attn.v_proj": 2, "v_proj": 4, "layers.1.self_attn.v_proj": 32},
    "alpha_pattern": {"down_proj": 64, "mlp.down_proj": 1}
  })";
  auto c = PeftConfig::parse(text, "x.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  auto q = c->target(0, LoraModule::kQ);
  EXPECT_EQ(q->rank, 8);
  EXPECT_FLOAT_EQ(q->scaling, 2.0f);
  auto v0 = c->target(0, LoraModule::kV);
  EXPECT_EQ(v0->rank, 4);
  EXPECT_FLOAT_EQ(v0->scaling, 4.0f);  // 16 / 4
  auto v1 = c->target(1, LoraModule::kV);
  EXPECT_EQ(v1->rank, 2);
  EXPECT_FLOAT_EQ(v1->scaling, 8.0f);  // 16 / 2
  auto down = c->target(1, LoraModule::kDown);
  EXPECT_EQ(down->rank, 8);
  EXPECT_EQ(down->alpha, 64);
  EXPECT_FLOAT_EQ(down->scaling, 8.0f);  // 64 / 8
  EXPECT_FALSE(c->target(0, LoraModule::kK).has_value());
}

TEST(PeftConfigTest, PatternKeyMatchesWholeComponentsOnly) {
  json j = testing::lora_config(8, 8, {"q_proj", "gate_proj", "up_proj"});
  j["rank_pattern"] = {{"p_proj", 2}};  // "up_proj" must not match "p_proj" mid-component
  j["alpha_pattern"] = {{"mlp\\..*", 4}};  // keys are regexes
  auto c = parse(j);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->target(0, LoraModule::kUp)->rank, 8);
  EXPECT_EQ(c->target(0, LoraModule::kQ)->alpha, 8);
  EXPECT_EQ(c->target(0, LoraModule::kGate)->alpha, 4);
  EXPECT_EQ(c->target(0, LoraModule::kUp)->alpha, 4);
}

TEST(PeftConfigTest, PatternValueErrorsNameTheKey) {
  json j = base_json();
  j["rank_pattern"] = {{"q_proj", 0}};
  auto c = parse(j);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_MSG_HAS(c.status(), "rank_pattern.q_proj");
  j["rank_pattern"] = {{"q_proj", "4"}};
  EXPECT_EQ(parse(j).status().code(), StatusCode::kInvalidArgument);
  j["rank_pattern"] = {{"q_proj", 4.5}};
  EXPECT_EQ(parse(j).status().code(), StatusCode::kInvalidArgument);
  j["rank_pattern"] = json::object();
  j["alpha_pattern"] = {{"(", 4}};
  c = parse(j);
  ASSERT_FALSE(c.is_ok());
  EXPECT_MSG_HAS(c.status(), "alpha_pattern");
  j["alpha_pattern"] = {1, 2};
  EXPECT_EQ(parse(j).status().code(), StatusCode::kInvalidArgument);
}

TEST(PeftConfigTest, ExcludeModules) {
  json j = testing::lora_config(8, 8, {"q_proj", "v_proj"});
  j["exclude_modules"] = {"model.layers.0.self_attn.v_proj"};
  auto c = parse(j);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(targets_of(*c, 2), "0.q_proj 1.q_proj 1.v_proj");
  j["exclude_modules"] = R"(.*\.1\..*)";
  c = parse(j);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(targets_of(*c, 2), "0.q_proj 0.v_proj");
}

struct Refusal {
  const char* name;
  const char* key;
  json value;
  StatusCode code;
  const char* message_part;
};

TEST(PeftConfigTest, RefusesWhatCannotBeServedByName) {
  const Refusal cases[] = {
      {"dora", "use_dora", true, StatusCode::kUnsupported, "DoRA adapters are not supported"},
      {"modules_to_save", "modules_to_save", {"lm_head", "embed_tokens"}, StatusCode::kUnsupported, "lm_head"},
      {"peft_type", "peft_type", "IA3", StatusCode::kUnsupported, "IA3"},
      {"peft_type_loha", "peft_type", "LOHA", StatusCode::kUnsupported, "LOHA"},
      {"bias", "bias", "lora_only", StatusCode::kUnsupported, "lora_only"},
      {"fan_in_fan_out", "fan_in_fan_out", true, StatusCode::kUnsupported, "fan_in_fan_out"},
      {"lora_bias", "lora_bias", true, StatusCode::kUnsupported, "lora_bias"},
      {"layer_replication", "layer_replication", {{0, 2}, {1, 3}}, StatusCode::kUnsupported, "layer_replication"},
      {"trainable_tokens", "trainable_token_indices", {1, 2}, StatusCode::kUnsupported, "trainable_token_indices"},
      {"embed_target", "target_modules", {"q_proj", "embed_tokens"}, StatusCode::kUnsupported, "embed_tokens"},
      {"lm_head_target", "target_modules", {"lm_head"}, StatusCode::kUnsupported, "lm_head"},
      {"lm_head_string", "target_modules", "lm_head", StatusCode::kUnsupported, "lm_head"},
      {"block_target", "target_modules", {"self_attn"}, StatusCode::kUnsupported, "self_attn"},
      {"empty_targets", "target_modules", json::array(), StatusCode::kInvalidArgument, "target_modules"},
      {"target_type", "target_modules", 5, StatusCode::kInvalidArgument, "target_modules"},
      {"r_zero", "r", 0, StatusCode::kInvalidArgument, "'r'"},
      {"r_string", "r", "8", StatusCode::kInvalidArgument, "'r'"},
      {"r_float", "r", 8.5, StatusCode::kInvalidArgument, "'r'"},
      {"alpha_negative", "lora_alpha", -1, StatusCode::kInvalidArgument, "lora_alpha"},
      {"alpha_string", "lora_alpha", "16", StatusCode::kInvalidArgument, "lora_alpha"},
      {"alpha_huge", "lora_alpha", 1e308, StatusCode::kInvalidArgument, "at most 65536"},
      {"alpha_pattern_huge", "alpha_pattern", {{"q_proj", 1e300}}, StatusCode::kInvalidArgument, "at most 65536"},
      {"rslora_type", "use_rslora", "yes", StatusCode::kInvalidArgument, "use_rslora"},
      {"dora_type", "use_dora", 1, StatusCode::kInvalidArgument, "use_dora"},
  };
  for (const Refusal& r : cases) {
    SCOPED_TRACE(r.name);
    json j = base_json();
    j[r.key] = r.value;
    auto c = parse(j);
    ASSERT_FALSE(c.is_ok());
    EXPECT_EQ(c.status().code(), r.code) << c.status().to_string();
    EXPECT_MSG_HAS(c.status(), r.message_part);
    EXPECT_MSG_HAS(c.status(), "test/adapter_config.json");
  }
}

TEST(PeftConfigTest, MalformedDocuments) {
  auto c = PeftConfig::parse("{\"peft_type\": \"LORA\",", "bad.json");
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kCorrupt);
  EXPECT_MSG_HAS(c.status(), "bad.json");
  c = PeftConfig::parse("[1, 2]", "list.json");
  EXPECT_EQ(c.status().code(), StatusCode::kCorrupt);
  json j = base_json();
  j.erase("peft_type");
  c = parse(j);
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_MSG_HAS(c.status(), "peft_type");
  j = base_json();
  j.erase("target_modules");
  c = parse(j);
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_MSG_HAS(c.status(), "target_modules");
}

TEST(PeftConfigTest, LoadReadsTheDirectory) {
  const std::string dir = testing::make_temp_dir("lg-peft");
  ASSERT_FALSE(dir.empty());
  auto missing = PeftConfig::load(dir);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_MSG_HAS(missing.status(), "adapter_config.json");
  testing::write_text(dir + "/adapter_config.json", base_json().dump());
  auto c = PeftConfig::load(dir);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->source(), dir + "/adapter_config.json");
  fs::remove_all(dir);
}

TEST(PeftConfigTest, RealStoriesConfigs) {
  LG_REQUIRE_SHARED("models/stories260K-lora/a/adapter_config.json");
  const std::string root = testing::shared_dir() + "/models/stories260K-lora/";
  auto a = PeftConfig::load(root + "a");
  auto b = PeftConfig::load(root + "b");
  auto c = PeftConfig::load(root + "c");
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(targets_of(*a, 1), "0.q_proj 0.k_proj 0.v_proj 0.o_proj");
  EXPECT_EQ(targets_of(*c, 1), "0.q_proj 0.v_proj");
  EXPECT_FLOAT_EQ(a->target(4, LoraModule::kO)->scaling, 2.0f);
  EXPECT_FLOAT_EQ(b->target(4, LoraModule::kDown)->scaling, 0.5f);
  EXPECT_FLOAT_EQ(c->target(4, LoraModule::kV)->scaling, 3.0f);
}

}  // namespace
}  // namespace loragate
