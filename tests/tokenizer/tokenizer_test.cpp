// Tokenizer behaviour beyond the goldens: load time, round trips, byte
// fallback, streaming decode, small synthetic pipelines, thread safety.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tests/test_util.h"
#include "tests/tokenizer/token_ids.h"

namespace loragate {
namespace {

std::unique_ptr<Tokenizer> load_shared(const std::string& relative_dir) {
  auto loaded = Tokenizer::load(testing::shared_dir() + "/" + relative_dir);
  EXPECT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  return loaded.is_ok() ? std::move(loaded).value() : nullptr;
}

// ---- production files ----------------------------------------------------------

TEST(TokenizerLoad, Qwen3LoadsFast) {
  LG_REQUIRE_SHARED("tokenizers/qwen3/tokenizer.json");
  auto t0 = std::chrono::steady_clock::now();
  auto tk = load_shared("tokenizers/qwen3");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(tk);
  std::printf("qwen3 tokenizer.json (11 MB) loaded in %.0f ms\n", seconds * 1000);
  EXPECT_LT(seconds, 3.0);
  EXPECT_EQ(tk->vocab_size(), 151669);
  EXPECT_EQ(tk->eos_id(), 151645);  // <|im_end|> from tokenizer_config.json
  EXPECT_FALSE(tk->bos_id().has_value());
  EXPECT_EQ(tk->token_to_id("<think>"), 151667);
  EXPECT_FALSE(tk->is_special(151667));
  EXPECT_TRUE(tk->is_special(151643));
  EXPECT_EQ(tk->id_to_token(151644), "<|im_start|>");
  EXPECT_EQ(tk->id_to_token(-1), "");
  EXPECT_EQ(tk->id_to_token(151669), "");
}

TEST(TokenizerLoad, MistralFacts) {
  LG_REQUIRE_SHARED("tokenizers/mistral7b/tokenizer.json");
  auto tk = load_shared("tokenizers/mistral7b");
  ASSERT_TRUE(tk);
  EXPECT_EQ(tk->vocab_size(), 32000);
  EXPECT_EQ(tk->bos_id(), 1);
  EXPECT_EQ(tk->eos_id(), 2);
  EXPECT_EQ(tk->encode("Hello world", true), ids({1, 22557, 1526}));
  EXPECT_EQ(tk->token_to_id("<0x0A>"), 13);
}

TEST(TokenizerRoundTrip, Qwen3) {
  LG_REQUIRE_SHARED("tokenizers/qwen3/tokenizer.json");
  auto tk = load_shared("tokenizers/qwen3");
  ASSERT_TRUE(tk);
  for (const std::string s : {"", "Hello, world!", "  two  spaces\n\n\ttab", "naïve café Straße", "你好，世界！",
                              "😀👍🏽 👨‍👩‍👧‍👦 🇺🇸", "مرحبا بالعالم", "x²½ ١٢٣", "<think>\nhm\n</think>"}) {
    EXPECT_EQ(tk->decode(tk->encode(s, true), false), s) << s;
  }
}

TEST(TokenizerRoundTrip, MistralByteFallback) {
  LG_REQUIRE_SHARED("tokenizers/mistral7b/tokenizer.json");
  auto tk = load_shared("tokenizers/mistral7b");
  ASSERT_TRUE(tk);
  // 𝄞 has no token of its own: it is spelled as its four UTF-8 bytes.
  auto clef = tk->encode("𝄞", false);
  std::vector<std::string> tokens;
  for (int32_t id : clef) tokens.push_back(tk->id_to_token(id));
  ASSERT_GE(tokens.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(tokens.end() - 4, tokens.end()),
            (std::vector<std::string>{"<0xF0>", "<0x9D>", "<0x84>", "<0x9E>"}));
  for (const std::string s : {"Hello world", "naïve café", "你好，世界！ 𝄞 😀", "tabs\tand\nnewlines"}) {
    EXPECT_EQ(tk->decode(tk->encode(s, true), true), s) << s;
  }
  // A lone continuation byte decodes to U+FFFD, one per byte.
  auto b = tk->token_to_id("<0x9D>");
  ASSERT_TRUE(b);
  std::vector<int32_t> broken = {*b, *b};
  EXPECT_EQ(tk->decode(broken, false), "\xEF\xBF\xBD\xEF\xBF\xBD");
  // Invalid UTF-8 input is repaired to U+FFFD before encoding, never crashes.
  EXPECT_EQ(tk->encode("a\xFF" "b", false), tk->encode("a\xEF\xBF\xBD" "b", false));
}

TEST(TokenizerRoundTrip, Stories260kByteFallback) {
  LG_REQUIRE_SHARED("models/stories260K/tokenizer.json");
  auto tk = load_shared("models/stories260K");
  ASSERT_TRUE(tk);
  for (const std::string s : {"Zoë had a big dog.", "日本語", "emoji 🍕!"}) {
    auto enc = tk->encode(s, true);
    ASSERT_FALSE(enc.empty());
    EXPECT_EQ(enc[0], 1);
    EXPECT_EQ(tk->decode(enc, true), s);
  }
}

TEST(TokenizerSpeed, LongParagraph) {
  LG_REQUIRE_SHARED("tokenizers/mistral7b/tokenizer.json");
  LG_REQUIRE_SHARED("tokenizers/qwen3/tokenizer.json");
  std::string para;
  while (para.size() < 2000) para += "The harbor town woke slowly that morning, as it always did. ";
  para.resize(2000);
  for (const char* name : {"tokenizers/mistral7b", "tokenizers/qwen3"}) {
    auto tk = load_shared(name);
    ASSERT_TRUE(tk);
    auto t0 = std::chrono::steady_clock::now();
    auto enc = tk->encode(para, false);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: 2000-char paragraph -> %zu ids in %.2f ms\n", name, enc.size(), ms);
    EXPECT_LT(ms, 200.0);
    EXPECT_EQ(tk->decode(enc, false), para);
  }
}

TEST(TokenizerThreads, ConcurrentEncodeMatchesSerial) {
  LG_REQUIRE_SHARED("tokenizers/qwen3/tokenizer.json");
  auto tk = load_shared("tokenizers/qwen3");
  ASSERT_TRUE(tk);
  std::vector<std::string> texts = {"Hello world", "你好，世界！", "don't 123 stop", "😀 <|im_start|>user\nhi"};
  std::vector<std::vector<int32_t>> want;
  for (const auto& t : texts) want.push_back(tk->encode(t, true));
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int r = 0; r < 200; ++r) {
        for (size_t i = 0; i < texts.size(); ++i) failures[w] += tk->encode(texts[i], true) != want[i];
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

// ---- IncrementalDecoder ----------------------------------------------------------

// Streams `text` (encoded without specials) after `prompt` and checks the pieces.
void check_stream(const Tokenizer& tk, const std::string& prompt, const std::string& text, bool skip) {
  std::vector<int32_t> prompt_ids = prompt.empty() ? std::vector<int32_t>() : tk.encode(prompt, true);
  std::vector<int32_t> gen = tk.encode(text, false);
  std::vector<int32_t> all = prompt_ids;
  all.insert(all.end(), gen.begin(), gen.end());
  std::string before = tk.decode(prompt_ids, skip);
  std::string whole = tk.decode(all, skip);
  ASSERT_EQ(whole.compare(0, before.size(), before), 0) << "prompt decode is not a prefix";
  std::string want = whole.substr(before.size());

  IncrementalDecoder dec(tk, prompt_ids, skip);
  std::string got;
  for (int32_t id : gen) {
    std::string piece = dec.push(id);
    EXPECT_TRUE(tok::utf8_is_valid(piece)) << "broken UTF-8 piece in stream of \"" << text << "\"";
    EXPECT_FALSE(piece.ends_with("\xEF\xBF\xBD")) << text;
    got += piece;
  }
  got += dec.flush();
  EXPECT_EQ(got, want) << "prompt \"" << prompt << "\", text \"" << text << "\"";
}

TEST(IncrementalDecoder, MatchesFullDecode) {
  LG_REQUIRE_SHARED("tokenizers/qwen3/tokenizer.json");
  LG_REQUIRE_SHARED("tokenizers/mistral7b/tokenizer.json");
  LG_REQUIRE_SHARED("models/stories260K/tokenizer.json");
  const std::vector<std::string> texts = {"Hello world, how are you?", "你好，世界！今天天气很好。",
                                          "emoji 😀👍🏽 👨‍👩‍👧‍👦 🇺🇸 done", "𝄞 clef and 𠀀 ext-B",
                                          " leading space", "line\nbreaks\n\n and\ttabs", "<think>\nok\n</think>"};
  for (const char* name : {"tokenizers/qwen3", "tokenizers/mistral7b", "models/stories260K"}) {
    auto tk = load_shared(name);
    ASSERT_TRUE(tk);
    for (const auto& text : texts) {
      for (bool skip : {false, true}) {
        check_stream(*tk, "", text, skip);
        check_stream(*tk, "Once upon a time", text, skip);
      }
    }
  }
}

TEST(IncrementalDecoder, HoldsBackPartialCharacters) {
  LG_REQUIRE_SHARED("tokenizers/mistral7b/tokenizer.json");
  auto tk = load_shared("tokenizers/mistral7b");
  ASSERT_TRUE(tk);
  // 𝄞 as four byte tokens: nothing comes out until the last byte arrives.
  std::vector<int32_t> bytes;
  for (const char* t : {"<0xF0>", "<0x9D>", "<0x84>", "<0x9E>"}) bytes.push_back(*tk->token_to_id(t));
  std::vector<int32_t> prompt = tk->encode("x", true);
  IncrementalDecoder dec(*tk, prompt, true);
  EXPECT_EQ(dec.push(bytes[0]), "");
  EXPECT_EQ(dec.push(bytes[1]), "");
  EXPECT_EQ(dec.push(bytes[2]), "");
  EXPECT_EQ(dec.push(bytes[3]), "𝄞");
  EXPECT_EQ(dec.push(*tk->token_to_id("▁the")), " the");
  // An unfinished character at the end comes out as U+FFFD on flush.
  EXPECT_EQ(dec.push(bytes[0]), "");
  EXPECT_EQ(dec.flush(), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace loragate
