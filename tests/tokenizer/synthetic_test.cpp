// Small hand-written tokenizer.json files: one pipeline feature per test, and
// malformed files that must fail with a clear Status (never crash).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tests/test_util.h"
#include "tests/tokenizer/token_ids.h"

namespace loragate {
namespace {

struct Loaded {
  Result<std::unique_ptr<Tokenizer>> result;
  std::string path;  // of tokenizer.json, for message checks
};

// Writes `json` as tokenizer.json (and `config` as tokenizer_config.json when
// not empty) into a fresh temp dir and loads it.
Loaded load_inline(const std::string& json, const std::string& config = "") {
  std::string dir = testing::make_temp_dir("lg-tok");
  std::ofstream(dir + "/tokenizer.json") << json;
  if (!config.empty()) std::ofstream(dir + "/tokenizer_config.json") << config;
  Loaded out{Tokenizer::load(dir), dir + "/tokenizer.json"};
  std::filesystem::remove_all(dir);
  return out;
}

// A tokenizer.json with a BPE model over `vocab` / `merges` and the given
// extra top-level members (normalizer, pre_tokenizer, ...).
std::string bpe_json(const std::string& vocab, const std::string& merges, const std::string& extra = "",
                     const std::string& model_extra = "") {
  return R"({"version": "1.0", )" + extra + R"("model": {"type": "BPE", "vocab": )" + vocab +
         R"(, "merges": )" + merges + model_extra + "}}";
}


// ---- features ----------------------------------------------------------------

TEST(TokenizerSynthetic, MergesInBothFormatsAndRankOrder) {
  const std::string vocab = R"({"a":0,"b":1,"c":2,"ab":3,"bc":4,"abc":5})";
  auto strings = load_inline(bpe_json(vocab, R"(["b c", "a b", "a bc"])"));
  ASSERT_TRUE(strings.result.is_ok()) << strings.result.status().to_string();
  auto pairs = load_inline(bpe_json(vocab, R"([["b","c"], ["a","b"], ["a","bc"]])"));
  ASSERT_TRUE(pairs.result.is_ok()) << pairs.result.status().to_string();
  // "b c" has the lower rank, so a|bc then abc, never ab|c.
  EXPECT_EQ((*strings.result)->encode("abc", false), ids({5}));
  EXPECT_EQ((*pairs.result)->encode("abc", false), ids({5}));
  EXPECT_EQ((*pairs.result)->encode("abcab", false), ids({5, 3}));
  EXPECT_EQ((*pairs.result)->decode(ids({5, 3}), false), "abc ab");  // no decoder: tokens joined by spaces
}

TEST(TokenizerSynthetic, IgnoreMerges) {
  const std::string vocab = R"({"a":0,"b":1,"c":2,"bc":3,"abc":4})";
  auto merged = load_inline(bpe_json(vocab, R"(["b c"])"));
  auto whole = load_inline(bpe_json(vocab, R"(["b c"])", "", R"(, "ignore_merges": true)"));
  ASSERT_TRUE(merged.result.is_ok() && whole.result.is_ok());
  EXPECT_EQ((*merged.result)->encode("abc", false), ids({0, 3}));
  EXPECT_EQ((*whole.result)->encode("abc", false), ids({4}));  // a vocab word is not split
}

TEST(TokenizerSynthetic, ContinuingSubwordPrefix) {
  // "##" marks non-initial characters; merging a + ##b gives "ab".
  const std::string vocab = R"({"a":0,"##b":1,"ab":2,"##a":3})";
  auto loaded = load_inline(bpe_json(vocab, R"(["a ##b"])", "", R"(, "continuing_subword_prefix": "##")"));
  ASSERT_TRUE(loaded.result.is_ok()) << loaded.result.status().to_string();
  EXPECT_EQ((*loaded.result)->encode("ab", false), ids({2}));
  EXPECT_EQ((*loaded.result)->encode("aa", false), ids({0, 3}));
}

TEST(TokenizerSynthetic, UnknownTokensFuseOrNot) {
  const std::string vocab = R"({"<unk>":0,"a":1})";
  auto fused = load_inline(bpe_json(vocab, "[]", "", R"(, "unk_token": "<unk>", "fuse_unk": true)"));
  ASSERT_TRUE(fused.result.is_ok()) << fused.result.status().to_string();
  EXPECT_EQ((*fused.result)->encode("xya", false), ids({0, 1}));
  auto plain = load_inline(bpe_json(vocab, "[]", "", R"(, "unk_token": "<unk>", "fuse_unk": false)"));
  ASSERT_TRUE(plain.result.is_ok());
  EXPECT_EQ((*plain.result)->encode("xya", false), ids({0, 0, 1}));
  auto no_unk = load_inline(bpe_json(vocab, "[]"));
  ASSERT_TRUE(no_unk.result.is_ok());
  EXPECT_EQ((*no_unk.result)->encode("xya", false), ids({1}));  // unknown characters vanish without unk_token
}

TEST(TokenizerSynthetic, MetaspacePrependFirstAndAddedTokens) {
  const std::string vocab = R"({"<s>":0,"a":1,"b":2,"▁":3,"▁a":4,"▁b":5})";
  const std::string extra = R"("added_tokens": [{"id":0,"content":"<s>","special":true,"normalized":false}],
    "pre_tokenizer": {"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true},
    "decoder": {"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true},
    "post_processor": {"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},
      {"Sequence":{"id":"A","type_id":0}}],"special_tokens":{"<s>":{"id":"<s>","ids":[0],"tokens":["<s>"]}}},)";
  auto loaded = load_inline(bpe_json(vocab, R"(["▁ a", "▁ b"])", extra));
  ASSERT_TRUE(loaded.result.is_ok()) << loaded.result.status().to_string();
  const Tokenizer& tk = **loaded.result;
  EXPECT_EQ(tk.encode("a b", false), ids({4, 5}));
  EXPECT_EQ(tk.encode("a b", true), ids({0, 4, 5}));
  // After an added token the segment is not at the start of the input: no ▁.
  EXPECT_EQ(tk.encode("<s>a", false), ids({0, 1}));
  EXPECT_EQ(tk.decode(ids({4, 5}), false), "a b");
  EXPECT_EQ(tk.decode(ids({0, 4, 5}), true), "a b");
  EXPECT_EQ(tk.bos_id(), 0);
}

TEST(TokenizerSynthetic, AddedTokenStripRules) {
  const std::string vocab = R"({"a":0," ":1,"<m>":2})";
  auto strip = load_inline(bpe_json(
      vocab, "[]", R"("added_tokens": [{"id":2,"content":"<m>","special":true,"lstrip":true,"rstrip":true}],)"));
  auto keep = load_inline(bpe_json(vocab, "[]", R"("added_tokens": [{"id":2,"content":"<m>","special":true}],)"));
  ASSERT_TRUE(strip.result.is_ok() && keep.result.is_ok());
  EXPECT_EQ((*strip.result)->encode("a  <m> a", false), ids({0, 2, 0}));
  EXPECT_EQ((*keep.result)->encode("a <m> a", false), ids({0, 1, 2, 1, 0}));
  auto single = load_inline(bpe_json(
      vocab, "[]", R"("added_tokens": [{"id":2,"content":"<m>","special":false,"single_word":true,"normalized":false}],)"));
  ASSERT_TRUE(single.result.is_ok());
  EXPECT_EQ((*single.result)->encode("a<m>", false).size(), 1u);  // inside a word: not matched (and <,m,> unknown)
  EXPECT_EQ((*single.result)->encode("<m> a", false), ids({2, 1, 0}));
}

TEST(TokenizerSynthetic, ConfigBosWhenNoTemplate) {
  const std::string vocab = R"({"<s>":0,"</s>":1,"a":2})";
  const std::string added = R"("added_tokens": [{"id":0,"content":"<s>","special":true},{"id":1,"content":"</s>","special":true}],)";
  auto loaded = load_inline(bpe_json(vocab, "[]", added),
                            R"({"add_bos_token": true, "add_eos_token": true, "bos_token": {"content": "<s>"}, "eos_token": "</s>"})");
  ASSERT_TRUE(loaded.result.is_ok()) << loaded.result.status().to_string();
  EXPECT_EQ((*loaded.result)->encode("a", true), ids({0, 2, 1}));
  EXPECT_EQ((*loaded.result)->encode("a", false), ids({2}));
}

TEST(TokenizerSynthetic, ByteLevelGpt2Regex) {
  // Byte-level vocab of just the characters needed: Ġ is the space byte.
  const std::string vocab = R"({"h":0,"i":1,"Ġ":2,"!":3,"hi":4,"Ġhi":5})";
  const std::string extra = R"("pre_tokenizer": {"type":"ByteLevel","add_prefix_space":true,"use_regex":true},
    "decoder": {"type":"ByteLevel"},)";
  auto loaded = load_inline(bpe_json(vocab, R"(["h i", "Ġ hi"])", extra));
  ASSERT_TRUE(loaded.result.is_ok()) << loaded.result.status().to_string();
  EXPECT_EQ((*loaded.result)->encode("hi hi!", false), ids({5, 5, 3}));
  EXPECT_EQ((*loaded.result)->decode(ids({5, 5, 3}), false), " hi hi!");
}

TEST(TokenizerSynthetic, NormalizersAndDigits) {
  const std::string vocab = R"({"a":0,"1":1,"2":2,"12":3,"é":4})";
  const std::string extra = R"("normalizer": {"type":"Sequence","normalizers":[{"type":"NFKC"},{"type":"Lowercase"},
      {"type":"Strip","strip_left":true,"strip_right":true}]},
    "pre_tokenizer": {"type":"Digits","individual_digits":true},)";
  auto loaded = load_inline(bpe_json(vocab, R"(["1 2"])", extra));
  ASSERT_TRUE(loaded.result.is_ok()) << loaded.result.status().to_string();
  // Ａ (fullwidth) -> A -> a; E + combining acute -> É -> é; digits stay apart.
  EXPECT_EQ((*loaded.result)->encode("  \xEF\xBC\xA1" "12E\xCC\x81 ", false), ids({0, 1, 2, 4}));
}

// ---- building blocks -------------------------------------------------------------

TEST(TokenizerUnits, LossyUtf8LikeRust) {
  EXPECT_EQ(tok::utf8_lossy("ok"), "ok");
  EXPECT_EQ(tok::utf8_lossy("\xF0\x9F\x98"), "\xEF\xBF\xBD");               // one cut sequence, one U+FFFD
  EXPECT_EQ(tok::utf8_lossy("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");       // overlong: per byte
  EXPECT_EQ(tok::utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(tok::utf8_lossy("\xE2\x82" "a"), "\xEF\xBF\xBD" "a");
  EXPECT_EQ(tok::utf8_incomplete_tail("ab\xF0\x9F"), 2u);
  EXPECT_EQ(tok::utf8_incomplete_tail("ab\xF0\x9F\x98\x80"), 0u);
}

TEST(TokenizerUnits, RegexFollowsOniguruma) {
  auto ws = tok::Regex::compile("\\s+", false);
  ASSERT_TRUE(ws.is_ok());
  // U+0085 is White_Space for Oniguruma (HF) but not PCRE2's \s: it must match.
  auto m = (*ws)->find_all("a\xC2\x85 b");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0], (std::pair<size_t, size_t>{1, 4}));
  EXPECT_EQ(tok::rewrite_whitespace_classes("[^\\s\\p{L}]\\S"), "[^\\s\\x{85}\\p{L}][^\\s\\x{85}]");
  auto ci = tok::Regex::compile("(?i:'s|'t)|\\p{N}{1,3}", false);
  ASSERT_TRUE(ci.is_ok()) << ci.status().to_string();
  EXPECT_EQ((*ci)->find_all("IT'S 12345").size(), 3u);  // 'S, 123, 45
  EXPECT_FALSE(tok::Regex::compile("(unclosed", false).is_ok());
}

TEST(TokenizerUnits, SplitBehaviors) {
  auto dash = tok::Regex::compile("-", true);
  ASSERT_TRUE(dash.is_ok());
  auto pieces = [&](tok::SplitBehavior b, bool invert = false) {
    std::vector<std::string> out;
    std::string text = "a-b--c";
    for (auto [s, e] : tok::split_ranges(text, **dash, b, invert)) out.push_back(text.substr(s, e - s));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces(tok::SplitBehavior::kRemoved), (V{"a", "b", "c"}));
  EXPECT_EQ(pieces(tok::SplitBehavior::kIsolated), (V{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(pieces(tok::SplitBehavior::kMergedWithPrevious), (V{"a-", "b-", "-", "c"}));
  EXPECT_EQ(pieces(tok::SplitBehavior::kMergedWithNext), (V{"a", "-b", "-", "-c"}));
  EXPECT_EQ(pieces(tok::SplitBehavior::kContiguous), (V{"a", "-", "b", "--", "c"}));
  EXPECT_EQ(pieces(tok::SplitBehavior::kRemoved, true), (V{"-", "-", "-"}));
}

// ---- malformed files ---------------------------------------------------------------

void expect_error(const Loaded& l, StatusCode code, const std::vector<std::string>& mentions) {
  ASSERT_FALSE(l.result.is_ok());
  const Status& s = l.result.status();
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(l.path), std::string::npos) << "no file name in: " << s.message();
  for (const auto& m : mentions) EXPECT_NE(s.message().find(m), std::string::npos) << "no '" << m << "' in: " << s.message();
}

TEST(TokenizerBadFiles, ClearErrors) {
  const std::string vocab = R"({"a":0,"b":1,"ab":2})";
  expect_error(load_inline(R"({"model": {"type": "BPE", )"), StatusCode::kCorrupt, {"invalid JSON"});
  expect_error(load_inline(R"({"version": "1.0"})"), StatusCode::kCorrupt, {"model"});
  expect_error(load_inline(R"({"model": {"type": "Unigram", "vocab": []}})"), StatusCode::kUnsupported,
               {"model.type", "Unigram"});
  expect_error(load_inline(bpe_json(vocab, R"(["a c"])")), StatusCode::kCorrupt, {"model.merges[0]", "'c'"});
  expect_error(load_inline(bpe_json(vocab, R"(["ab"])")), StatusCode::kCorrupt, {"model.merges[0]"});
  expect_error(load_inline(bpe_json(vocab, R"([["b","a"]])")), StatusCode::kCorrupt, {"model.merges[0]", "'ba'"});
  expect_error(load_inline(bpe_json(vocab, R"([42])")), StatusCode::kCorrupt, {"model.merges[0]"});
  expect_error(load_inline(bpe_json(R"({"a":"x"})", "[]")), StatusCode::kCorrupt, {"model.vocab"});
  expect_error(load_inline(bpe_json(vocab, "{}")), StatusCode::kCorrupt, {"model.merges"});
  expect_error(load_inline(bpe_json(vocab, "[]", "", R"(, "unk_token": "<unk>")")), StatusCode::kCorrupt,
               {"model.unk_token"});
  expect_error(load_inline(bpe_json(vocab, "[]", R"("normalizer": {"type": "Precompiled"},)")),
               StatusCode::kUnsupported, {"normalizer.type", "Precompiled"});
  expect_error(load_inline(bpe_json(vocab, "[]",
                                    R"("normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Bogus"}]},)")),
               StatusCode::kUnsupported, {"normalizer.normalizers[1].type", "Bogus"});
  expect_error(load_inline(bpe_json(vocab, "[]",
                                    R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated"},)")),
               StatusCode::kCorrupt, {"pre_tokenizer.pattern.Regex"});
  expect_error(load_inline(bpe_json(vocab, "[]", R"("decoder": {"type": "WordPiece"},)")), StatusCode::kUnsupported,
               {"decoder.type", "WordPiece"});
  expect_error(load_inline(bpe_json(vocab, "[]", R"("added_tokens": [{"content": "x"}],)")), StatusCode::kCorrupt,
               {"added_tokens[0].id"});
  expect_error(load_inline(bpe_json(vocab, "[]", R"("added_tokens": [{"id": 2000000000, "content": "x"}],)")),
               StatusCode::kCorrupt, {"added_tokens[0].id"});
  expect_error(load_inline(bpe_json(vocab, "[]", R"("added_tokens": [{"id": 3, "content": 7}],)")),
               StatusCode::kCorrupt, {"added_tokens[0].content"});
  expect_error(load_inline(bpe_json(vocab, "[]", "", R"(, "dropout": 0.1)")), StatusCode::kUnsupported,
               {"model.dropout"});
  expect_error(load_inline("[1, 2]"), StatusCode::kCorrupt, {"JSON object"});
  expect_error(load_inline(""), StatusCode::kCorrupt, {"invalid JSON"});
}

TEST(TokenizerBadFiles, ConfigAndMissingFiles) {
  auto missing = Tokenizer::load("/nonexistent/lg-tok-dir");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("tokenizer.json"), std::string::npos);

  const std::string good = bpe_json(R"({"a":0})", "[]");
  auto bad_config = load_inline(good, "{not json");
  ASSERT_FALSE(bad_config.result.is_ok());
  EXPECT_NE(bad_config.result.status().message().find("tokenizer_config.json"), std::string::npos);
  auto bad_bos = load_inline(good, R"({"bos_token": "<nope>"})");
  ASSERT_FALSE(bad_bos.result.is_ok());
  EXPECT_NE(bad_bos.result.status().message().find("bos_token"), std::string::npos);
}

}  // namespace
}  // namespace loragate
