// GBNF front end: the rules it writes (through dump()), the language they
// accept (through the Matcher), errors with line:column, the input bounds,
// and the JSON object grammar of json_gbnf.h.
#include "grammar/gbnf.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>

#include "grammar/json_gbnf.h"
#include "grammar/matcher.h"

namespace loragate::grammar {
namespace {

std::shared_ptr<const Grammar> gbnf_or_die(std::string_view text) {
  auto g = parse_gbnf(text);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  if (!g.is_ok()) return nullptr;
  return std::make_shared<const Grammar>(std::move(g).value());
}

std::string gbnf_error(std::string_view text) {
  auto g = parse_gbnf(text);
  EXPECT_FALSE(g.is_ok()) << "parsed: " << text;
  return g.is_ok() ? "" : g.status().message();
}

TEST(GbnfTest, RulesAlternativesAndForwardReferences) {
  const auto g = gbnf_or_die(
      "root ::= greeting \" \" name   # a comment\n"
      "greeting ::= \"hi\" | \"yo\"\n"
      "name ::= [a-c]\n");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->dump(),
            "root (root) ::= greeting [\\x20] name\n"
            "greeting ::= [h] [i] | [y] [o]\n"
            "name ::= [a-c]\n");
}

TEST(GbnfTest, QuantifiersBecomeRepeatRules) {
  const auto g = gbnf_or_die("root ::= \"ab\"? [0-9]{2,3} \"x\"*\n");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->dump(),
            "root (root) ::= root-opt [0-9] [0-9] root-opt-1 root-star\n"
            "root-1 ::= [a] [b]\n"
            "root-opt ::= root-1 | \"\"\n"
            "root-opt-1 ::= [0-9] | \"\"\n"
            "root-star ::= [x] root-star | \"\"\n");
  EXPECT_TRUE(grammar_matches(g, "ab12"));
  EXPECT_TRUE(grammar_matches(g, "123xxx"));
  EXPECT_FALSE(grammar_matches(g, "a12"));
  EXPECT_FALSE(grammar_matches(g, "ab1234"));
}

TEST(GbnfTest, RunsOfQuantifiersAreOneRepetition) {
  EXPECT_EQ(gbnf_or_die("root ::= \"a\"?+\n")->dump(), gbnf_or_die("root ::= \"a\"*\n")->dump());
  EXPECT_EQ(gbnf_or_die("root ::= \"a\"+?\n")->dump(), gbnf_or_die("root ::= \"a\"*\n")->dump());
  EXPECT_EQ(gbnf_or_die("root ::= \"a\"++\n")->dump(), gbnf_or_die("root ::= \"a\"+\n")->dump());
  EXPECT_EQ(gbnf_or_die("root ::= \"a\"??\n")->dump(), gbnf_or_die("root ::= \"a\"?\n")->dump());
  EXPECT_EQ(gbnf_or_die("root ::= \"a\"" + std::string(80, '*') + "\n")->dump(), gbnf_or_die("root ::= \"a\"*\n")->dump());
}

TEST(GbnfTest, EscapesAreCodePointsWrittenAsUtf8) {
  const auto g = gbnf_or_die("root ::= \"\\x41\\u00e9\\n\\\"\\\\\" \"\xc3\xa9\"\n");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->dump(), "root (root) ::= [A] [\\xc3] [\\xa9] [\\x0a] [\\x22] [\\x5c] [\\xc3] [\\xa9]\n");
  EXPECT_TRUE(grammar_matches(g, "A\xc3\xa9\n\"\\\xc3\xa9"));
}

TEST(GbnfTest, ClassesNegationAndAnyCharAreUtf8Aware) {
  const auto g = gbnf_or_die("root ::= [^\"\\\\] [\\u00e9-\\u00ea] .\n");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(grammar_matches(g, "x\xc3\xa9z"));
  EXPECT_TRUE(grammar_matches(g, "\xe2\x82\xac\xc3\xaa\xf0\x9f\x98\x80"));  // € ê 😀
  EXPECT_FALSE(grammar_matches(g, "\"\xc3\xa9z"));
  EXPECT_FALSE(grammar_matches(g, "x\xc3\xabz"));  // ë is outside the range
  EXPECT_FALSE(grammar_matches(g, "x\xc3\xa9\xc3"));  // half a code point
}

TEST(GbnfTest, GroupsSpanLinesAndNest) {
  const auto g = gbnf_or_die(
      "root ::= (\n"
      "  \"a\" ( \"b\" | \"c\" )+  # inside a group, lines continue\n"
      "  | \"d\"\n"
      ")\n");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(grammar_matches(g, "abcb"));
  EXPECT_TRUE(grammar_matches(g, "d"));
  EXPECT_FALSE(grammar_matches(g, "a"));
  EXPECT_FALSE(grammar_matches(g, "ad"));
}

TEST(GbnfTest, RepeatingSomethingThatCanBeEmptyIsNotLeftRecursion) {
  // x* with a nullable x would recurse without consuming; the writer repeats x minus "".
  const auto g = gbnf_or_die("root ::= (\"a\"? \"b\"?)* \"c\"\nws ::= \" \"?\nlist ::= (ws \"x\"?)+\n");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(grammar_matches(g, "c"));
  EXPECT_TRUE(grammar_matches(g, "abbaac"));
  EXPECT_FALSE(grammar_matches(g, "abx"));
}

TEST(GbnfTest, EmptyAlternativesAndCrlfLines) {
  const auto g = gbnf_or_die("root ::= \"a\" more\r\nmore ::= | \",\" root\r\n");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(grammar_matches(g, "a,a,a"));
  EXPECT_FALSE(grammar_matches(g, "a,"));
}

TEST(GbnfTest, ErrorsNameLineAndColumn) {
  EXPECT_EQ(gbnf_error("root ::= \"a\"\nitem ::= (\"b\" | \"c\"\n"), "gbnf 3:1: expected ')' to close the '(' at 2:10");
  EXPECT_EQ(gbnf_error("root ::= \"a\" value\n"), "gbnf 1:14: undefined rule 'value'");
  EXPECT_EQ(gbnf_error("item ::= \"a\"\n"), "gbnf: no rule named 'root' (the start rule)");
  EXPECT_EQ(gbnf_error("root ::= \"a\"\nroot ::= \"b\"\n"), "gbnf 2:1: rule 'root' is defined twice");
  EXPECT_NE(gbnf_error("root ::= \"a\\q\"\n").find("gbnf 1:12: unknown escape"), std::string::npos);
  EXPECT_EQ(gbnf_error("root ::= \"abc\n"), "gbnf 1:10: unterminated string literal (expected '\"')");
  EXPECT_EQ(gbnf_error("root ::= [a-z\n"), "gbnf 1:10: unterminated character class (expected ']')");
  EXPECT_EQ(gbnf_error("root ::= [z-a]\n"), "gbnf 1:11: character range is out of order");
  EXPECT_EQ(gbnf_error("root ::= * \"a\"\n"), "gbnf 1:10: '*' has nothing before it to repeat");
  EXPECT_EQ(gbnf_error("root ::= \"a\"{3,2}\n"), "gbnf 1:16: in {m,n}, n is smaller than m");
  EXPECT_EQ(gbnf_error("root ::= \"a\"{2\n"), "gbnf 1:15: expected '}'");
  EXPECT_EQ(gbnf_error("root ::= \"a\" )\n"), "gbnf 1:14: expected '|', an element, or the end of the line");
  EXPECT_EQ(gbnf_error("root = \"a\"\n"), "gbnf 1:6: expected '::=' after the rule name");
  EXPECT_EQ(gbnf_error("::= \"a\"\n"), "gbnf 1:1: expected a rule name");
  EXPECT_EQ(gbnf_error("root ::= \"\xff\"\n"), "gbnf 1:11: invalid UTF-8");
  EXPECT_EQ(gbnf_error("root ::= \"\\U00110000\"\n"), "gbnf 1:11: code point is beyond U+10FFFF");
  EXPECT_EQ(gbnf_error("root ::= \"\\ud800\"\n"), "gbnf 1:11: a surrogate code point cannot be written as UTF-8");
}

TEST(GbnfTest, LeftRecursionAndEmptyLanguagesAreRefused) {
  EXPECT_NE(gbnf_error("root ::= root \"a\" | \"b\"\n").find("left-recursive (root -> root)"), std::string::npos);
  EXPECT_EQ(gbnf_error("root ::= \"a\" root\n"), "gbnf: the grammar matches no text");
}

TEST(GbnfTest, InputsAreBounded) {
  EXPECT_NE(gbnf_error(std::string(kMaxGbnfBytes + 1, ' ')).find("the limit is 65536"), std::string::npos);
  const std::string deep = "root ::= " + std::string(150, '(') + "\"a\"" + std::string(150, ')') + "\n";
  EXPECT_NE(gbnf_error(deep).find("nested deeper than 100"), std::string::npos);
  EXPECT_NE(gbnf_error("root ::= \"a\"{1001}\n").find("over the limit of 1000"), std::string::npos);
  EXPECT_NE(gbnf_error("root ::= \"a\"{99999999999999999999}\n").find("over the limit"), std::string::npos);
  // 11 x {0,1000}: over the rule cap, refused rather than built.
  std::string many = "root ::=";
  for (int i = 0; i < 11; ++i) many += " \"a\"{0,1000}";
  EXPECT_NE(gbnf_error(many + "\n").find("too large (over 10000 rules)"), std::string::npos);
  // Nested counts do not multiply (a repeated item becomes one rule) ...
  EXPECT_TRUE(parse_gbnf("root ::= ((\"ab\"{1000}){1000}){1000}\n").is_ok());
  // ... but long sequences of copies add up, and stop at the element cap.
  std::string copies = "root ::=";
  for (int i = 0; i < 201; ++i) copies += " \"a\"{1000}";
  EXPECT_NE(gbnf_error(copies + "\n").find("too large (over 200000 elements)"), std::string::npos);
}

TEST(GbnfTest, JsonObjectGrammarAcceptsJsonObjectsOnly) {
  const auto g = gbnf_or_die(kJsonObjectGbnf);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(grammar_matches(g, R"({"a": [1, 2.5e-3, "x\u00e9"], "b": null})"));
  EXPECT_TRUE(grammar_matches(g, "{}"));
  EXPECT_TRUE(grammar_matches(g, "{ \"k\" :\n\t{\"n\": [true, false, -0, {}, []]} }"));
  EXPECT_TRUE(grammar_matches(g, "{\"\xc3\xa9\\n\": \"\xf0\x9f\x98\x80\"}"));
  EXPECT_FALSE(grammar_matches(g, R"({"a": })"));
  EXPECT_FALSE(grammar_matches(g, R"([1, 2])"));  // an array is not an object
  EXPECT_FALSE(grammar_matches(g, R"({"a": 01})"));
  EXPECT_FALSE(grammar_matches(g, R"({"a": 1,})"));
  EXPECT_FALSE(grammar_matches(g, "{\"a\": \"tab\there\"}"));  // control characters must be escaped
  EXPECT_FALSE(grammar_matches(g, R"({'a': 1})"));
  EXPECT_TRUE(grammar_matches(g, "{" + std::string(20, ' ') + "}"));
  EXPECT_FALSE(grammar_matches(g, "{" + std::string(21, ' ') + "}"));  // whitespace is bounded
}

TEST(GbnfTest, ArbitraryBytesNeverCrash) {
  // A cheap in-test fuzz: mutations of the JSON grammar, parsed or refused, never a crash.
  std::mt19937 rng(24);
  const std::string base(kJsonObjectGbnf);
  int parsed = 0;
  for (int i = 0; i < 300; ++i) {
    std::string text = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0: text[at] = static_cast<char>(rng() % 256); break;
        case 1: text.erase(at, 1 + rng() % 8); break;
        default: text.insert(at, 1, "()[]{}|*+?\"\\#\n"[rng() % 14]); break;
      }
      if (text.empty()) text = "x";
    }
    parsed += parse_gbnf(text).is_ok() ? 1 : 0;
  }
  EXPECT_GT(parsed, 0);
  EXPECT_LT(parsed, 300);
}

}  // namespace
}  // namespace loragate::grammar
