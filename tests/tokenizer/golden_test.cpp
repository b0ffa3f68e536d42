// Encodes and decodes every string of ../shared/tokenizers/golden_encodings.json
// with both production tokenizers and compares with HF tokenizers' output;
// checks the stories260K prompts of ../shared/models/golden.json.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

using nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

const json& goldens() {
  static const json g = read_json(testing::shared_dir() + "/tokenizers/golden_encodings.json");
  return g;
}

const Tokenizer& production_tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[name];
  if (!slot) {
    auto loaded = Tokenizer::load(testing::shared_dir() + "/tokenizers/" + name);
    EXPECT_TRUE(loaded.is_ok()) << loaded.status().to_string();
    if (loaded.is_ok()) slot = std::move(loaded).value();
  }
  return *slot;
}

std::string describe_ids_diff(const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  std::ostringstream os;
  os << "first difference at index " << i << ": got ";
  os << (i < got.size() ? std::to_string(got[i]) : "<end>") << ", want " << (i < want.size() ? std::to_string(want[i]) : "<end>");
  os << " (got " << got.size() << " ids, want " << want.size() << ")";
  return os.str();
}

std::string describe_text_diff(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  std::ostringstream os;
  os << "first difference at byte " << i << ": got \"" << got << "\", want \"" << want << "\"";
  return os.str();
}

void check_tokenizer(const std::string& name) {
  const Tokenizer& tk = production_tokenizer(name);
  const json& g = goldens();
  const json& strings = g["strings"];
  const json& results = g["results"][name];
  ASSERT_EQ(strings.size(), results.size());
  int checked = 0;
  for (size_t i = 0; i < strings.size(); ++i) {
    const std::string id = strings[i]["id"];
    const std::string text = strings[i]["text"];
    ASSERT_EQ(results[i]["id"], id);
    for (const char* mode : {"special", "plain"}) {
      const json& want = results[i][mode];
      auto want_ids = want["ids"].get<std::vector<int32_t>>();
      auto got_ids = tk.encode(text, std::string(mode) == "special");
      EXPECT_EQ(got_ids, want_ids) << name << " " << id << " (" << mode << "): " << describe_ids_diff(got_ids, want_ids);
      auto want_tokens = want["tokens"].get<std::vector<std::string>>();
      for (size_t k = 0; k < want_ids.size() && k < want_tokens.size(); ++k) {
        EXPECT_EQ(tk.id_to_token(want_ids[k]), want_tokens[k]) << name << " " << id << " token " << k;
      }
      std::string dec = tk.decode(want_ids, false);
      EXPECT_EQ(dec, want["decode"].get<std::string>())
          << name << " " << id << " (" << mode << ") decode: " << describe_text_diff(dec, want["decode"]);
      std::string dec_skip = tk.decode(want_ids, true);
      EXPECT_EQ(dec_skip, want["decode_skip_special"].get<std::string>())
          << name << " " << id << " (" << mode << ") decode skip_special: "
          << describe_text_diff(dec_skip, want["decode_skip_special"]);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * static_cast<int>(strings.size()));
}

TEST(TokenizerGolden, Mistral7b) {
  LG_REQUIRE_SHARED("tokenizers/golden_encodings.json");
  LG_REQUIRE_SHARED("tokenizers/mistral7b/tokenizer.json");
  check_tokenizer("mistral7b");
}

TEST(TokenizerGolden, Qwen3) {
  LG_REQUIRE_SHARED("tokenizers/golden_encodings.json");
  LG_REQUIRE_SHARED("tokenizers/qwen3/tokenizer.json");
  check_tokenizer("qwen3");
}

TEST(TokenizerGolden, Qwen3ChatRenders) {
  LG_REQUIRE_SHARED("tokenizers/golden_chat.json");
  LG_REQUIRE_SHARED("tokenizers/qwen3/tokenizer.json");
  const Tokenizer& tk = production_tokenizer("qwen3");
  json g = read_json(testing::shared_dir() + "/tokenizers/golden_chat.json");
  const json& renders = g["templates"]["qwen3"]["renders"];
  ASSERT_EQ(renders.size(), 10u);
  for (const auto& r : renders) {
    std::string text = r["text"];
    auto want = r["ids"].get<std::vector<int32_t>>();
    auto got = tk.encode(text, false);
    EXPECT_EQ(got, want) << r["conversation"] << ": " << describe_ids_diff(got, want);
    EXPECT_EQ(tk.decode(want, false), r["decode"].get<std::string>()) << r["conversation"];
  }
}

TEST(TokenizerGolden, Stories260kPrompts) {
  LG_REQUIRE_SHARED("models/golden.json");
  LG_REQUIRE_SHARED("models/stories260K/tokenizer.json");
  auto loaded = Tokenizer::load(testing::shared_dir() + "/models/stories260K");
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const Tokenizer& tk = **loaded;
  EXPECT_EQ(tk.vocab_size(), 512);
  EXPECT_EQ(tk.bos_id(), 1);
  EXPECT_EQ(tk.eos_id(), 2);
  json g = read_json(testing::shared_dir() + "/models/golden.json");
  ASSERT_FALSE(g["cases"].empty());
  for (const auto& c : g["cases"]) {
    std::string prompt = c["prompt"];
    auto want = c["prompt_ids"].get<std::vector<int32_t>>();
    auto got = tk.encode(prompt, true);
    EXPECT_EQ(got, want) << "prompt \"" << prompt << "\": " << describe_ids_diff(got, want);
    // Decoding without the BOS gives the prompt back (Strip removes the ▁ Prepend added).
    std::vector<int32_t> body(want.begin() + 1, want.end());
    EXPECT_EQ(tk.decode(body, true), prompt);
  }
}

}  // namespace
}  // namespace loragate
