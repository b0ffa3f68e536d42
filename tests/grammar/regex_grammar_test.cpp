// Regex front end: the rules it writes (through dump()), the language they
// accept (through the Matcher, whole-output anchored), the constructs it
// refuses, and its bounds.
#include "grammar/regex_grammar.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>

#include "grammar/matcher.h"

namespace loragate::grammar {
namespace {

std::shared_ptr<const Grammar> regex_or_die(std::string_view pattern) {
  auto g = compile_regex(pattern);
  EXPECT_TRUE(g.is_ok()) << pattern << ": " << g.status().message();
  if (!g.is_ok()) return nullptr;
  return std::make_shared<const Grammar>(std::move(g).value());
}

std::string regex_error(std::string_view pattern) {
  auto g = compile_regex(pattern);
  EXPECT_FALSE(g.is_ok()) << "compiled: " << pattern;
  return g.is_ok() ? "" : g.status().message();
}

bool regex_matches(std::string_view pattern, std::string_view text) {
  const auto g = regex_or_die(pattern);
  return g != nullptr && grammar_matches(g, text);
}

TEST(RegexGrammarTest, PhoneNumberRules) {
  const auto g = regex_or_die(R"(\d{3}-\d{4})");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->dump(), "regex (root) ::= [0-9] [0-9] [0-9] [\\x2d] [0-9] [0-9] [0-9] [0-9]\n");
  EXPECT_TRUE(grammar_matches(g, "555-1234"));
  EXPECT_FALSE(grammar_matches(g, "5551234"));
  EXPECT_FALSE(grammar_matches(g, "555-12345"));  // the whole output must match
}

TEST(RegexGrammarTest, LeadingCaretAndTrailingDollarChangeNothing) {
  EXPECT_EQ(regex_or_die("^ab$")->dump(), regex_or_die("ab")->dump());
  EXPECT_EQ(regex_or_die("^a|^b$")->dump(), regex_or_die("a|b")->dump());
  EXPECT_EQ(regex_or_die("a*?b+?c??d{1,2}?")->dump(), regex_or_die("a*b+c?d{1,2}")->dump());  // lazy = greedy
}

TEST(RegexGrammarTest, AlternationGroupsAndQuantifiers) {
  EXPECT_TRUE(regex_matches("(ab|c)+d?", "abcab"));
  EXPECT_TRUE(regex_matches("(ab|c)+d?", "cd"));
  EXPECT_FALSE(regex_matches("(ab|c)+d?", "d"));
  EXPECT_FALSE(regex_matches("(ab|c)+d?", "abb"));
  EXPECT_TRUE(regex_matches("(?:x|y){2,}", "xyx"));
  EXPECT_FALSE(regex_matches("(?:x|y){2,}", "x"));
  EXPECT_TRUE(regex_matches("a{,2}b", "aab"));
  EXPECT_FALSE(regex_matches("a{,2}b", "aaab"));
  EXPECT_TRUE(regex_matches("(?<year>\\d{4})-(?P<month>\\d\\d)", "2024-06"));  // named groups are plain groups
  EXPECT_TRUE(regex_matches("a|", ""));
  EXPECT_TRUE(regex_matches("", ""));
  EXPECT_FALSE(regex_matches("", "a"));
}

TEST(RegexGrammarTest, RepeatsOfNullableGroupsCompile) {
  EXPECT_TRUE(regex_matches("(a|b?)*c", "c"));
  EXPECT_TRUE(regex_matches("(a|b?)*c", "abbac"));
  EXPECT_TRUE(regex_matches("(a*b*)+", ""));
  EXPECT_TRUE(regex_matches("(a*b*)+", "aabab"));
  EXPECT_FALSE(regex_matches("(a*b*)+", "abc"));
  EXPECT_TRUE(regex_matches("(()|a)*", "aa"));
}

TEST(RegexGrammarTest, LiteralBracesAndPunctuation) {
  EXPECT_TRUE(regex_matches("a{b}", "a{b}"));
  EXPECT_TRUE(regex_matches("x{,}", "x{,}"));
  EXPECT_TRUE(regex_matches(R"(\{"k": \[\d\]\}\.\$)", "{\"k\": [7]}.$"));
  EXPECT_TRUE(regex_matches("a]b}", "a]b}"));
}

TEST(RegexGrammarTest, ClassesAndEscapes) {
  EXPECT_TRUE(regex_matches(R"([a-cx\d_-]+)", "ab3_-x"));
  EXPECT_FALSE(regex_matches(R"([a-cx\d_-]+)", "d"));
  EXPECT_TRUE(regex_matches("[]a]+", "]a]"));  // ']' first is a literal
  EXPECT_TRUE(regex_matches(R"([^\d\s]+)", "ab\xc3\xa9"));
  EXPECT_FALSE(regex_matches(R"([^\d\s]+)", "a b"));
  EXPECT_FALSE(regex_matches(R"([^\d\s]+)", "a\xc2\xa0"));  // U+00A0 is a space to ECMA-262
  EXPECT_TRUE(regex_matches(R"([\D]+)", "x\xe2\x82\xac"));
  EXPECT_TRUE(regex_matches(R"(\w+\W\S)", "a_9 x"));
  EXPECT_FALSE(regex_matches(R"(\w+)", "\xc3\xa9"));  // \w is ASCII
  EXPECT_TRUE(regex_matches(R"(\x41\u00e9\u{1F600}\t\n)", "A\xc3\xa9\xf0\x9f\x98\x80\t\n"));
  EXPECT_TRUE(regex_matches(R"(\ud83d\ude00)", "\xf0\x9f\x98\x80"));  // a UTF-16 pair is one code point
  EXPECT_TRUE(regex_matches(R"([\u00e0-\u00ff]{2})", "\xc3\xa0\xc3\xbf"));
  EXPECT_TRUE(regex_matches("\xc3\xa9+", "\xc3\xa9\xc3\xa9"));  // a quantifier repeats the whole code point
  EXPECT_FALSE(regex_matches("\xc3\xa9+", "\xc3\xa9\xa9"));
}

TEST(RegexGrammarTest, DotIsAnyCodePointButNewline) {
  EXPECT_TRUE(regex_matches("a.c", "abc"));
  EXPECT_TRUE(regex_matches("a.c", "a\xe2\x82\xac" "c"));
  EXPECT_FALSE(regex_matches("a.c", "a\nc"));
  EXPECT_FALSE(regex_matches("a.c", "a\xe2\x82" "c"));  // not a whole code point
}

TEST(RegexGrammarTest, UnsupportedConstructsAreNamed) {
  EXPECT_EQ(regex_error("a(?=b)"), "regex position 2: lookaround assertions are not supported");
  EXPECT_EQ(regex_error("(?<!a)b"), "regex position 1: lookaround assertions are not supported");
  EXPECT_EQ(regex_error(R"((a)\1)"), "regex position 4: backreferences are not supported");
  EXPECT_EQ(regex_error(R"((?<n>a)\k<n>)"), "regex position 8: backreferences are not supported");
  EXPECT_EQ(regex_error(R"(\bword)"), "regex position 1: word-boundary assertions (\\b) are not supported");
  EXPECT_EQ(regex_error("a^b"), "regex position 2: '^' is only supported at the start of the pattern (anchors elsewhere are not)");
  EXPECT_EQ(regex_error("a$b"), "regex position 2: '$' is only supported at the end of the pattern (anchors elsewhere are not)");
  EXPECT_EQ(regex_error("(a$)"), "regex position 3: '$' is only supported at the end of the pattern (anchors elsewhere are not)");
  EXPECT_EQ(regex_error("a*+"), "regex position 3: possessive quantifiers are not supported");
  EXPECT_EQ(regex_error("(?i)a"), "regex position 1: inline flags and other (?...) groups are not supported");
  EXPECT_EQ(regex_error(R"(\p{L})"), "regex position 1: Unicode property escapes (\\p{...}) are not supported");
  EXPECT_EQ(regex_error("a**"), "regex position 3: a quantifier cannot follow another quantifier");
  EXPECT_EQ(regex_error("*a"), "regex position 1: quantifier has nothing before it to repeat");
  EXPECT_EQ(regex_error("(ab"), "regex position 1: unterminated group (expected ')')");
  EXPECT_EQ(regex_error("ab)"), "regex position 3: unmatched ')'");
  EXPECT_EQ(regex_error("[ab"), "regex position 1: unterminated character class (expected ']')");
  EXPECT_EQ(regex_error("[z-a]"), "regex position 2: character range is out of order");
  EXPECT_EQ(regex_error(R"([\d-z])"), "regex position 2: a class escape (\\d, \\w, \\s) cannot start a range");
  EXPECT_EQ(regex_error("a{3,2}"), "regex position 2: in {m,n}, n is smaller than m");
  EXPECT_EQ(regex_error("ab\\"), "regex position 3: the pattern ends with a lone '\\'");
  EXPECT_EQ(regex_error(R"(\q)"), "regex position 1: unknown escape");
  EXPECT_EQ(regex_error(R"(\ud800)"), "regex position 1: a lone surrogate code point is not a character");
  EXPECT_EQ(regex_error("a\xff"), "regex position 2: invalid UTF-8");
  EXPECT_EQ(regex_error(R"([^\x00-\u{10FFFF}])"), "regex: the grammar matches no text");
}

TEST(RegexGrammarTest, InputsAreBounded) {
  EXPECT_NE(regex_error(std::string(kMaxRegexBytes + 1, 'a')).find("the limit is 4096"), std::string::npos);
  EXPECT_NE(regex_error("a{1001}").find("over the limit of 1000"), std::string::npos);
  EXPECT_NE(regex_error("a{0,99999999999999999999}").find("over the limit of 1000"), std::string::npos);
  EXPECT_NE(regex_error(std::string(101, '(') + std::string(101, ')')).find("nested deeper than 100"),
            std::string::npos);
  EXPECT_TRUE(compile_regex(std::string(100, '(') + "a" + std::string(100, ')')).is_ok());
  std::string many;
  for (int i = 0; i < 11; ++i) many += "a{0,1000}";
  EXPECT_NE(regex_error(many).find("too large (over 10000 rules)"), std::string::npos);
  EXPECT_TRUE(compile_regex("((a{1000}){1000}){1000}").is_ok());  // a repeated group is one rule: no blowup
}

TEST(RegexGrammarTest, ArbitraryPatternsNeverCrash) {
  std::mt19937 rng(24);
  const std::string alphabet = "ab()[]{}|*+?^$.\\-,0123dswDSWux:?<>=!P\xc3\xa9";
  int compiled = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string pattern;
    const size_t len = rng() % 24;
    for (size_t k = 0; k < len; ++k) pattern += alphabet[rng() % alphabet.size()];
    compiled += compile_regex(pattern).is_ok() ? 1 : 0;
  }
  EXPECT_GT(compiled, 0);
  EXPECT_LT(compiled, 2000);
}

}  // namespace
}  // namespace loragate::grammar
