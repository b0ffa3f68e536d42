// Synthetic models: presets, written files load back (weights, config,
// tokenizer), determinism, bf16 variant, and the tokenizer vocabulary's shape.
#include "model/synth_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model_config.h"
#include "model/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class SynthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = loragate::testing::make_temp_dir("lg-synth");
    ASSERT_FALSE(root_.empty());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string sub(const std::string& name) const { return (fs::path(root_) / name).string(); }
  std::string root_;
};

std::vector<std::pair<std::string, std::vector<int64_t>>> expected_tensors(const ModelConfig& c) {
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim,
                kv = c.num_key_value_heads * c.head_dim, f = c.intermediate_size;
  std::vector<std::pair<std::string, std::vector<int64_t>>> out = {
      {"model.embed_tokens.weight", {c.vocab_size, h}},
      {"model.norm.weight", {h}},
      {"lm_head.weight", {c.vocab_size, h}}};
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    out.push_back({p + "input_layernorm.weight", {h}});
    out.push_back({p + "self_attn.q_proj.weight", {q, h}});
    out.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    out.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    out.push_back({p + "self_attn.o_proj.weight", {h, q}});
    out.push_back({p + "post_attention_layernorm.weight", {h}});
    out.push_back({p + "mlp.gate_proj.weight", {f, h}});
    out.push_back({p + "mlp.up_proj.weight", {f, h}});
    out.push_back({p + "mlp.down_proj.weight", {h, f}});
  }
  return out;
}

std::vector<float> as_f32(const TensorView& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  convert_to_f32(t.dtype, t.data, v.data(), v.size());
  return v;
}

TEST(SynthPresetTest, PresetShapes) {
  auto tiny = synth_preset_config("tiny");
  ASSERT_TRUE(tiny.is_ok());
  EXPECT_EQ(tiny->hidden_size, 64);
  EXPECT_EQ(tiny->num_hidden_layers, 2);
  EXPECT_EQ(tiny->num_attention_heads, 4);
  EXPECT_EQ(tiny->num_key_value_heads, 2);
  EXPECT_EQ(tiny->head_dim, 16);
  EXPECT_EQ(tiny->intermediate_size, 176);
  EXPECT_EQ(tiny->vocab_size, 512);
  EXPECT_FALSE(tiny->tie_word_embeddings);

  auto m110 = synth_preset_config("110m");
  ASSERT_TRUE(m110.is_ok());
  EXPECT_EQ(m110->hidden_size, 768);
  EXPECT_EQ(m110->num_hidden_layers, 12);
  EXPECT_EQ(m110->num_attention_heads, 12);
  EXPECT_EQ(m110->num_key_value_heads, 4);
  EXPECT_EQ(m110->intermediate_size, 2048);
  EXPECT_EQ(m110->vocab_size, 32000);

  auto b1 = synth_preset_config("1b");
  ASSERT_TRUE(b1.is_ok());
  EXPECT_EQ(b1->hidden_size, 2048);
  EXPECT_EQ(b1->num_hidden_layers, 16);
  EXPECT_EQ(b1->num_attention_heads, 32);
  EXPECT_EQ(b1->num_key_value_heads, 8);
  EXPECT_EQ(b1->intermediate_size, 5632);
  EXPECT_EQ(b1->head_dim, 64);

  auto b8 = synth_preset_config("8b");
  ASSERT_TRUE(b8.is_ok());
  EXPECT_EQ(b8->hidden_size, 4096);
  EXPECT_EQ(b8->num_hidden_layers, 32);
  EXPECT_EQ(b8->num_key_value_heads, 8);
  EXPECT_EQ(b8->intermediate_size, 14336);
  EXPECT_EQ(b8->vocab_size, 128256);
  EXPECT_EQ(b8->head_dim, 128);

  // Every preset survives its own serialisation.
  for (const char* p : {"tiny", "110m", "1b", "8b"}) {
    auto c = synth_preset_config(p);
    auto back = ModelConfig::parse(c->to_json(), p);
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_TRUE(*c == *back) << p;
  }

  auto bad = synth_preset_config("7b");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'7b'"), std::string::npos);
}

TEST_F(SynthTest, TinyLoadsBackWithAllTensors) {
  ASSERT_TRUE(write_synth_model(sub("tiny"), {"tiny", 7, DType::kF32}).is_ok());
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json",
                        "tokenizer_config.json", "generation_config.json"}) {
    EXPECT_TRUE(fs::exists(fs::path(sub("tiny")) / f)) << f;
  }
  auto config = ModelConfig::load(sub("tiny"));
  ASSERT_TRUE(config.is_ok()) << config.status().to_string();
  auto preset = synth_preset_config("tiny");
  EXPECT_TRUE(*config == *preset);
  EXPECT_EQ(config->bos_token_id, 1);
  EXPECT_EQ(config->eos_token_ids, (std::vector<int32_t>{2}));

  auto store = WeightStore::open_dir(sub("tiny"));
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  const auto want = expected_tensors(*config);
  EXPECT_EQ((*store)->names().size(), want.size());
  EXPECT_EQ(want.size(), 21u);
  for (const auto& [name, shape] : want) {
    auto t = (*store)->require(name, shape);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    EXPECT_EQ((*t)->dtype, DType::kF32);
  }

  // Matrices ~ N(0, 0.02), norms ~ 1.
  const auto emb = as_f32(*(*store)->find("model.embed_tokens.weight"));
  double sum = 0, sq = 0;
  for (float x : emb) {
    sum += x;
    sq += static_cast<double>(x) * x;
  }
  const double mean = sum / emb.size(), sd = std::sqrt(sq / emb.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(sd, 0.02, 0.002);
  for (float x : as_f32(*(*store)->find("model.norm.weight"))) EXPECT_NEAR(x, 1.0, 0.15);
  // Different tensors get different values.
  const auto q0 = as_f32(*(*store)->find("model.layers.0.self_attn.q_proj.weight"));
  const auto q1 = as_f32(*(*store)->find("model.layers.1.self_attn.q_proj.weight"));
  EXPECT_NE(q0, q1);
}

TEST_F(SynthTest, TinyTokenizerRoundTrips) {
  ASSERT_TRUE(write_synth_model(sub("tiny"), {"tiny", 0, DType::kF32}).is_ok());
  auto tok = Tokenizer::load(sub("tiny"));
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  auto config = ModelConfig::load(sub("tiny"));
  ASSERT_TRUE(config.is_ok());
  EXPECT_EQ((*tok)->vocab_size(), config->vocab_size);
  EXPECT_EQ((*tok)->bos_id(), 1);
  EXPECT_EQ((*tok)->eos_id(), 2);
  EXPECT_EQ((*tok)->token_to_id("<0x41>"), 3 + 0x41);
  for (const std::string text :
       {"Once upon a time, there was a little girl named Lily.",
        "The quick brown fox jumps over the lazy dog! 123 + 456 = 579?",
        "Zoë said: \"naïve café\"\n  spaces   here "}) {
    const auto ids = (*tok)->encode(text, /*add_special_tokens=*/true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], 1);  // <s>
    for (int32_t id : ids) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, 512);
    }
    EXPECT_EQ((*tok)->decode(ids, /*skip_special_tokens=*/true), text);
  }
  // The merges make English cheaper than one token per character.
  const std::string story = "once upon a time there was a little girl";
  EXPECT_LT((*tok)->encode(story, false).size(), story.size() / 2);
}

TEST_F(SynthTest, SameOptionsGiveByteIdenticalFiles) {
  ASSERT_TRUE(write_synth_model(sub("a"), {"tiny", 42, DType::kF32}).is_ok());
  ASSERT_TRUE(write_synth_model(sub("b"), {"tiny", 42, DType::kF32}).is_ok());
  ASSERT_TRUE(write_synth_model(sub("c"), {"tiny", 43, DType::kF32}).is_ok());
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(sub("a"))) {
    const auto name = e.path().filename();
    EXPECT_EQ(read_file(e.path()), read_file(fs::path(sub("b")) / name)) << name;
    ++files;
  }
  EXPECT_EQ(files, 6u);  // + special_tokens_map.json; no temporary files left
  EXPECT_NE(read_file(fs::path(sub("a")) / "model.safetensors"),
            read_file(fs::path(sub("c")) / "model.safetensors"));
  EXPECT_EQ(read_file(fs::path(sub("a")) / "tokenizer.json"),
            read_file(fs::path(sub("c")) / "tokenizer.json"));
}

TEST_F(SynthTest, Bf16VariantMatchesF32Rounded) {
  ASSERT_TRUE(write_synth_model(sub("f32"), {"tiny", 5, DType::kF32}).is_ok());
  ASSERT_TRUE(write_synth_model(sub("bf16"), {"tiny", 5, DType::kBF16}).is_ok());
  auto a = WeightStore::open_dir(sub("f32"));
  auto b = WeightStore::open_dir(sub("bf16"));
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_NE(read_file(fs::path(sub("bf16")) / "config.json").find("bfloat16"), std::string::npos);
  for (const std::string& name : (*a)->names()) {
    const TensorView* ta = (*a)->find(name);
    const TensorView* tb = (*b)->find(name);
    ASSERT_NE(tb, nullptr) << name;
    EXPECT_EQ(tb->dtype, DType::kBF16);
    EXPECT_EQ(tb->shape, ta->shape);
    EXPECT_EQ(tb->nbytes * 2, ta->nbytes);
    const auto fa = as_f32(*ta);
    for (size_t i = 0; i < fa.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, tb->data + 2 * i, 2);
      ASSERT_EQ(h, f32_to_bf16(fa[i])) << name << "[" << i << "]";
    }
  }
  auto tok = Tokenizer::load(sub("bf16"));
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
}

TEST(SynthTokenizerTest, VocabularyLayoutAndMerges) {
  for (int64_t vocab : {512, 2000, 32000}) {
    auto text = synth_tokenizer_json(vocab);
    ASSERT_TRUE(text.is_ok()) << text.status().to_string();
    const auto j = nlohmann::json::parse(*text);
    const auto& v = j.at("model").at("vocab");
    ASSERT_EQ(static_cast<int64_t>(v.size()), vocab);
    std::vector<std::string> by_id(static_cast<size_t>(vocab));
    for (const auto& [tok, id] : v.items()) {
      const int64_t i = id.get<int64_t>();
      ASSERT_GE(i, 0);
      ASSERT_LT(i, vocab);
      ASSERT_TRUE(by_id[static_cast<size_t>(i)].empty()) << "id " << i << " used twice";
      by_id[static_cast<size_t>(i)] = tok;
    }
    EXPECT_EQ(by_id[0], "<unk>");
    EXPECT_EQ(by_id[1], "<s>");
    EXPECT_EQ(by_id[2], "</s>");
    EXPECT_EQ(by_id[3], "<0x00>");
    EXPECT_EQ(by_id[3 + 0xAB], "<0xAB>");
    EXPECT_EQ(by_id[258], "<0xFF>");
    EXPECT_EQ(by_id[259], "\xe2\x96\x81");
    EXPECT_EQ(by_id[260], "!");
    EXPECT_EQ(by_id[353], "~");
    // Each merge makes exactly the next new token from two earlier ones.
    const auto& merges = j.at("model").at("merges");
    ASSERT_EQ(static_cast<int64_t>(merges.size()), vocab - 354);
    for (size_t m = 0; m < merges.size(); ++m) {
      const std::string s = merges[m].get<std::string>();
      const size_t sp = s.find(' ');
      ASSERT_NE(sp, std::string::npos);
      const std::string left = s.substr(0, sp), right = s.substr(sp + 1);
      ASSERT_TRUE(v.contains(left) && v.contains(right)) << s;
      const int64_t new_id = 354 + static_cast<int64_t>(m);
      EXPECT_LT(v.at(left).get<int64_t>(), new_id);
      EXPECT_LT(v.at(right).get<int64_t>(), new_id);
      EXPECT_EQ(by_id[static_cast<size_t>(new_id)], left + right) << s;
    }
    EXPECT_TRUE(j.at("model").at("byte_fallback").get<bool>());
    EXPECT_TRUE(j.at("pre_tokenizer").is_null());
  }
  // English-like pieces appear early.
  const auto j = nlohmann::json::parse(*synth_tokenizer_json(512));
  const auto& v = j.at("model").at("vocab");
  EXPECT_TRUE(v.contains("\xe2\x96\x81" "the"));
  EXPECT_TRUE(v.contains("\xe2\x96\x81" "and"));

  EXPECT_EQ(synth_tokenizer_json(300).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SynthTest, LargeVocabTokenizerLoadsAndRoundTrips) {
  auto text = synth_tokenizer_json(32000);
  ASSERT_TRUE(text.is_ok());
  const std::string path = sub("tokenizer.json");
  std::ofstream(path, std::ios::binary) << *text;
  auto tok = Tokenizer::load_files(path, "");
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  EXPECT_EQ((*tok)->vocab_size(), 32000);
  const std::string s = "Tim and Sue played with the big red ball in the garden every morning.";
  EXPECT_EQ((*tok)->decode((*tok)->encode(s, true), true), s);
}

}  // namespace
}  // namespace loragate
