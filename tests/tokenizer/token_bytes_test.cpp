// Tokenizer::token_bytes: the bytes of a text's tokens, concatenated, are the
// text itself (byte-level Qwen3, including tokens that split a character) or
// the text after SentencePiece's leading space (Mistral, stories260K).
#include <gtest/gtest.h>

#include "tests/test_util.h"
#include "tokenizer/tokenizer.h"

namespace loragate {
namespace {

std::string concatenated_bytes(const Tokenizer& t, const std::string& text) {
  std::string out;
  for (int32_t id : t.encode(text, false)) out += t.token_bytes(id);
  return out;
}

const std::vector<std::string>& byte_texts() {
  static const std::vector<std::string> texts = {
      "Hello, world!", "{\"name\": \"Zoë\", \"n\": [1, 2.5e-3]}", "  two  spaces\nand a tab\t.",
      "日本語のテキストと絵文字 🎉🦀", "x"};
  return texts;
}

TEST(TokenBytesTest, ByteLevelTokensConcatenateToTheText) {
  LG_REQUIRE_SHARED("tokenizers/qwen3/tokenizer.json");
  auto t = Tokenizer::load(testing::shared_dir() + "/tokenizers/qwen3");
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  for (const std::string& text : byte_texts()) EXPECT_EQ(concatenated_bytes(**t, text), text);
  // Some token holds only part of a character (the emoji / CJK above split in byte-level BPE).
  bool partial = false;
  for (int32_t id : (*t)->encode("🎉🦀 絵文字", false)) {
    const std::string b = (*t)->token_bytes(id);
    partial |= (static_cast<unsigned char>(b.back()) & 0xC0) == 0x80 && (*t)->decode(std::vector<int32_t>{id}, false) != b;
  }
  EXPECT_TRUE(partial);
}

TEST(TokenBytesTest, SentencePieceTokensKeepTheirSpacesAndByteFallbacks) {
  LG_REQUIRE_SHARED("tokenizers/mistral7b/tokenizer.json");
  auto t = Tokenizer::load(testing::shared_dir() + "/tokenizers/mistral7b");
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  for (const std::string& text : byte_texts()) EXPECT_EQ(concatenated_bytes(**t, text), " " + text);
  const auto byte_token = (*t)->token_to_id("<0xE9>");
  ASSERT_TRUE(byte_token.has_value());
  EXPECT_EQ((*t)->token_bytes(*byte_token), "\xE9");
  EXPECT_EQ((*t)->token_bytes(-1), "");
}

}  // namespace
}  // namespace loragate
