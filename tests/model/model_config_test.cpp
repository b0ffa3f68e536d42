// ModelConfig: real stories260K config, Llama 3 / Mistral / Qwen2 variants,
// refusals (architecture, rope type, JSON, types, shapes) and generation_config
// merging.
#include "model/model_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/test_util.h"

namespace loragate {
namespace {

namespace fs = std::filesystem;

#define EXPECT_MSG_HAS(status, text) \
  EXPECT_NE((status).message().find(text), std::string::npos) << (status).to_string()

const char* const kLlama3 = R"({
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "hidden_size": 4096,
  "intermediate_size": 14336,
  "num_hidden_layers": 32,
  "num_attention_heads": 32,
  "num_key_value_heads": 8,
  "vocab_size": 128256,
  "max_position_embeddings": 131072,
  "rms_norm_eps": 1e-05,
  "rope_theta": 500000.0,
  "rope_scaling": {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "hidden_act": "silu",
  "attention_bias": false,
  "mlp_bias": false,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009]
})";

const char* const kMistral = R"({
  "architectures": ["MistralForCausalLM"],
  "model_type": "mistral",
  "hidden_size": 4096,
  "intermediate_size": 14336,
  "num_hidden_layers": 32,
  "num_attention_heads": 32,
  "num_key_value_heads": 8,
  "vocab_size": 32000,
  "max_position_embeddings": 32768,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0,
  "sliding_window": 4096,
  "hidden_act": "silu",
  "tie_word_embeddings": false,
  "bos_token_id": 1,
  "eos_token_id": 2
})";

const char* const kQwen2 = R"({
  "architectures": ["Qwen2ForCausalLM"],
  "model_type": "qwen2",
  "hidden_size": 896,
  "intermediate_size": 4864,
  "num_hidden_layers": 24,
  "num_attention_heads": 14,
  "num_key_value_heads": 2,
  "vocab_size": 151936,
  "max_position_embeddings": 32768,
  "max_window_layers": 21,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "rope_scaling": null,
  "sliding_window": 131072,
  "use_sliding_window": false,
  "hidden_act": "silu",
  "tie_word_embeddings": true,
  "bos_token_id": 151643,
  "eos_token_id": 151645
})";

// A minimal valid Llama config with one key replaced (value is raw JSON).
std::string llama_with(const std::string& key, const std::string& value) {
  std::string j = R"({"architectures":["LlamaForCausalLM"],"hidden_size":64,)"
                  R"("intermediate_size":172,"num_hidden_layers":2,"num_attention_heads":8,)"
                  R"("num_key_value_heads":4,"vocab_size":512,"rms_norm_eps":1e-5,)"
                  R"("rope_theta":10000.0)";
  const std::string needle = "\"" + key + "\":";
  const size_t pos = j.find(needle);
  if (pos == std::string::npos) {
    j += ",\"" + key + "\":" + value;
  } else {
    const size_t start = pos + needle.size();
    size_t end = j.find_first_of(",}", start);
    if (j[start] == '[') end = j.find(']', start) + 1;
    j.replace(start, end - start, value);
  }
  return j + "}";
}

TEST(ModelConfigTest, Stories260K) {
  LG_REQUIRE_SHARED("models/stories260K/config.json");
  auto c = ModelConfig::load(loragate::testing::shared_dir() + "/models/stories260K");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->architecture, "LlamaForCausalLM");
  EXPECT_EQ(c->model_type, "llama");
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->intermediate_size, 172);
  EXPECT_EQ(c->num_hidden_layers, 5);
  EXPECT_EQ(c->num_attention_heads, 8);
  EXPECT_EQ(c->num_key_value_heads, 4);
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->vocab_size, 512);
  EXPECT_EQ(c->max_position_embeddings, 512);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kNone);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->bos_token_id, 1);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{2}));
}

TEST(ModelConfigTest, Llama3RopeScalingAndEosList) {
  auto c = ModelConfig::parse(kLlama3, "llama3/config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->head_dim, 128);  // hidden / heads
  EXPECT_EQ(c->num_key_value_heads, 8);
  EXPECT_EQ(c->vocab_size, 128256);
  EXPECT_DOUBLE_EQ(c->rope_theta, 500000.0);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_DOUBLE_EQ(c->rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c->rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c->rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c->max_position_embeddings, 131072);
  EXPECT_EQ(c->bos_token_id, 128000);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->sliding_window, 0);
}

TEST(ModelConfigTest, MistralSlidingWindow) {
  auto c = ModelConfig::parse(kMistral, "mistral/config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->architecture, "MistralForCausalLM");
  EXPECT_EQ(c->model_type, "mistral");
  EXPECT_EQ(c->sliding_window, 4096);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->head_dim, 128);

  std::string no_window = kMistral;
  no_window.replace(no_window.find("\"sliding_window\": 4096"), 22, "\"sliding_window\": null");
  c = ModelConfig::parse(no_window, "mistral/config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->sliding_window, 0);
}

TEST(ModelConfigTest, Qwen2BiasAndSlidingWindowFlag) {
  auto c = ModelConfig::parse(kQwen2, "qwen2/config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->model_type, "qwen2");
  EXPECT_TRUE(c->attention_bias);
  EXPECT_EQ(c->sliding_window, 0);  // use_sliding_window false
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->num_key_value_heads, 2);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{151645}));

  std::string on = kQwen2;
  on.replace(on.find("\"use_sliding_window\": false"), 27, "\"use_sliding_window\": true");
  c = ModelConfig::parse(on, "qwen2/config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->sliding_window, 131072);
}

TEST(ModelConfigTest, ModelTypeWithoutArchitectures) {
  auto c = ModelConfig::parse(
      R"({"model_type":"mistral","hidden_size":64,"intermediate_size":128,)"
      R"("num_hidden_layers":1,"num_attention_heads":4,"vocab_size":100})",
      "mt.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->architecture, "MistralForCausalLM");
  EXPECT_EQ(c->num_key_value_heads, 4);  // defaults to num_attention_heads
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_EQ(c->bos_token_id, -1);
  EXPECT_TRUE(c->eos_token_ids.empty());

  auto bad = ModelConfig::parse(R"({"model_type":"gpt2","hidden_size":64})", "mt.json");
  EXPECT_EQ(bad.status().code(), StatusCode::kUnsupported);
  EXPECT_MSG_HAS(bad.status(), "'gpt2'");
}

TEST(ModelConfigTest, ExplicitHeadDimAndLinearRope) {
  auto c = ModelConfig::parse(llama_with("head_dim", "16"), "c.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->head_dim, 16);

  c = ModelConfig::parse(llama_with("rope_scaling", R"({"type":"linear","factor":2.0})"), "c.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_DOUBLE_EQ(c->rope_scaling.factor, 2.0);

  c = ModelConfig::parse(llama_with("rope_scaling", R"({"rope_type":"default"})"), "c.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kNone);
}

TEST(ModelConfigTest, UnsupportedArchitectureNamed) {
  auto c = ModelConfig::parse(llama_with("architectures", R"(["GPT2LMHeadModel"])"), "gpt2.json");
  EXPECT_EQ(c.status().code(), StatusCode::kUnsupported);
  EXPECT_MSG_HAS(c.status(), "architecture 'GPT2LMHeadModel' is not supported");
  EXPECT_MSG_HAS(c.status(), "LlamaForCausalLM");
  EXPECT_MSG_HAS(c.status(), "gpt2.json");
}

TEST(ModelConfigTest, UnsupportedRopeTypesNamed) {
  for (const char* type : {"yarn", "dynamic", "longrope"}) {
    auto c = ModelConfig::parse(
        llama_with("rope_scaling", std::string(R"({"rope_type":")") + type + R"(","factor":4.0})"),
        "rope.json");
    EXPECT_EQ(c.status().code(), StatusCode::kUnsupported) << type;
    EXPECT_MSG_HAS(c.status(), std::string("'") + type + "'");
    EXPECT_MSG_HAS(c.status(), "rope.json");
  }
}

TEST(ModelConfigTest, InvalidJson) {
  auto c = ModelConfig::parse(R"({"hidden_size": 64,)", "broken/config.json");
  EXPECT_EQ(c.status().code(), StatusCode::kCorrupt);
  EXPECT_MSG_HAS(c.status(), "broken/config.json");
  c = ModelConfig::parse("[1, 2]", "array.json");
  EXPECT_EQ(c.status().code(), StatusCode::kCorrupt);
}

TEST(ModelConfigTest, WrongTypesNameTheKey) {
  struct Case {
    const char* key;
    const char* value;
  };
  for (const Case& k : {Case{"hidden_size", "\"64\""}, Case{"vocab_size", "512.0"},
                        Case{"num_key_value_heads", "true"}, Case{"rms_norm_eps", "\"1e-5\""},
                        Case{"tie_word_embeddings", "1"}, Case{"eos_token_id", "\"</s>\""},
                        Case{"rope_scaling", "\"llama3\""}, Case{"architectures", "\"Llama\""}}) {
    auto c = ModelConfig::parse(llama_with(k.key, k.value), "types.json");
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << k.key << " " << c.status().to_string();
    EXPECT_MSG_HAS(c.status(), std::string("'") + k.key + "'");
    EXPECT_MSG_HAS(c.status(), "types.json");
  }
}

TEST(ModelConfigTest, InconsistentShapesNameTheKey) {
  struct Case {
    const char* key;
    const char* value;
    const char* named;
  };
  for (const Case& k : {Case{"num_key_value_heads", "3", "num_key_value_heads"},
                        Case{"num_key_value_heads", "16", "num_key_value_heads"},
                        Case{"num_attention_heads", "7", "num_attention_heads"},
                        Case{"hidden_size", "0", "hidden_size"},
                        Case{"vocab_size", "-5", "vocab_size"},
                        Case{"num_hidden_layers", "0", "num_hidden_layers"},
                        Case{"intermediate_size", "-1", "intermediate_size"},
                        Case{"rms_norm_eps", "0", "rms_norm_eps"},
                        Case{"rope_theta", "-1.0", "rope_theta"},
                        Case{"head_dim", "7", "head_dim"},
                        Case{"eos_token_id", "9999", "eos_token_id"}}) {
    auto c = ModelConfig::parse(llama_with(k.key, k.value), "shapes.json");
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument)
        << k.key << "=" << k.value << ": " << c.status().to_string();
    EXPECT_MSG_HAS(c.status(), std::string("'") + k.named + "'");
  }
  auto missing = ModelConfig::parse(R"({"architectures":["LlamaForCausalLM"]})", "m.json");
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_MSG_HAS(missing.status(), "'hidden_size'");
}

TEST(ModelConfigTest, UnsupportedActivation) {
  auto c = ModelConfig::parse(llama_with("hidden_act", "\"gelu\""), "act.json");
  EXPECT_EQ(c.status().code(), StatusCode::kUnsupported);
  EXPECT_MSG_HAS(c.status(), "gelu");
}

TEST(ModelConfigTest, ToJsonRoundTrips) {
  std::vector<std::string> sources = {kLlama3, kMistral, kQwen2,
                                      llama_with("rope_scaling", R"({"type":"linear","factor":2.5})"),
                                      llama_with("head_dim", "32")};
  std::string on = kQwen2;
  on.replace(on.find("\"use_sliding_window\": false"), 27, "\"use_sliding_window\": true");
  sources.push_back(on);
  for (const std::string& src : sources) {
    auto a = ModelConfig::parse(src, "a.json");
    ASSERT_TRUE(a.is_ok()) << a.status().to_string();
    auto b = ModelConfig::parse(a->to_json(), "b.json");
    ASSERT_TRUE(b.is_ok()) << b.status().to_string() << "\n" << a->to_json();
    EXPECT_TRUE(*a == *b) << a->to_json() << "\nvs\n" << b->to_json();
    EXPECT_EQ(a->to_json(), b->to_json());
  }
}

class ModelConfigDirTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = loragate::testing::make_temp_dir("lg-config"); }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(fs::path(dir_) / name, std::ios::trunc) << text;
  }
  std::string dir_;
};

TEST_F(ModelConfigDirTest, GenerationConfigMergesEos) {
  write("config.json", llama_with("eos_token_id", "[2, 3]"));
  write("generation_config.json", R"({"bos_token_id": 1, "eos_token_id": [3, 5, 2, 7]})");
  auto c = ModelConfig::load(dir_);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{2, 3, 5, 7}));
  EXPECT_EQ(c->bos_token_id, 1);  // config lacked it

  write("config.json", llama_with("bos_token_id", "4"));
  write("generation_config.json", R"({"bos_token_id": 1, "eos_token_id": 2})");
  c = ModelConfig::load(dir_);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->bos_token_id, 4);  // config wins
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{2}));
}

TEST_F(ModelConfigDirTest, LoadErrorsNameTheFile) {
  auto c = ModelConfig::load(dir_);
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_MSG_HAS(c.status(), dir_);

  write("config.json", "{not json");
  c = ModelConfig::load(dir_);
  EXPECT_EQ(c.status().code(), StatusCode::kCorrupt);
  EXPECT_MSG_HAS(c.status(), "config.json");

  write("config.json", llama_with("eos_token_id", "2"));
  write("generation_config.json", "{oops");
  c = ModelConfig::load(dir_);
  EXPECT_EQ(c.status().code(), StatusCode::kCorrupt);
  EXPECT_MSG_HAS(c.status(), "generation_config.json");

  write("generation_config.json", R"({"eos_token_id": "two"})");
  c = ModelConfig::load(dir_);
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_MSG_HAS(c.status(), "generation_config.json");
  EXPECT_MSG_HAS(c.status(), "'eos_token_id'");
}

}  // namespace
}  // namespace loragate
