// Grammar: validation (references, left recursion) and the builder's
// UTF-8 code-point rules, checked through dump(). Repetition is the front
// ends' (rule_writer.h), tested with them.
#include "grammar/grammar.h"

#include <gtest/gtest.h>

namespace loragate::grammar {
namespace {

TEST(GrammarTest, LeftRecursionIsRefusedNamingTheCycle) {
  GrammarBuilder b;
  const int32_t expr = b.add_rule("expr");
  const int32_t term = b.add_rule("term");
  b.add_alternative(expr, {Element::ref(term), Element::byte('+')});
  b.add_alternative(term, {Element::ref(expr)});
  b.add_alternative(term, GrammarBuilder::literal("x"));
  auto g = b.build(expr);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("left-recursive (expr -> term -> expr)"), std::string::npos)
      << g.status().message();
}

TEST(GrammarTest, RightRecursionAndNullablePrefixesAreChecked) {
  // ws ::= " " ws | ""
  const auto add_ws = [](GrammarBuilder& g) {
    const int32_t ws = g.add_rule("ws");
    g.add_alternative(ws, {Element::byte(' '), Element::ref(ws)});
    g.add_alternative(ws, {});
    return ws;
  };
  GrammarBuilder b;
  const int32_t list = b.add_rule("list");
  const int32_t ws = add_ws(b);
  b.add_alternative(list, {Element::ref(ws), Element::byte('x'), Element::ref(list)});
  b.add_alternative(list, {});
  EXPECT_TRUE(b.build(list).is_ok());

  GrammarBuilder c;
  const int32_t r = c.add_rule("r");
  const int32_t ws2 = add_ws(c);
  c.add_alternative(r, {Element::ref(ws2), Element::ref(r)});  // r reaches itself through an empty ws
  EXPECT_FALSE(c.build(r).is_ok());
}

TEST(GrammarTest, CodePointsSplitIntoUtf8BytePatterns) {
  GrammarBuilder b;
  // U+00E9 (c3 a9) .. U+0100 (c4 80), and ASCII a-c.
  const int32_t r = b.code_points({{0xE9, 0x100}, {'a', 'c'}}, false, "cls");
  auto g = b.build(r);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ(g->dump(), "cls (root) ::= [\\xc3] [\\xa9-\\xbf] | [\\xc4] [\\x80] | [a-c]\n");
}

TEST(GrammarTest, NegatedClassesSkipSurrogatesAndCoverEveryLength) {
  GrammarBuilder b;
  const int32_t r = b.code_points({{'"', '"'}, {'\\', '\\'}, {0, 0x1F}}, true, "char");
  auto g = b.build(r);
  ASSERT_TRUE(g.is_ok());
  const std::string d = g->dump();
  EXPECT_NE(d.find("[\\xed] [\\x80-\\x9f] [\\x80-\\xbf]"), std::string::npos) << d;  // up to U+D7FF
  EXPECT_EQ(d.find("[\\xed] [\\xa0"), std::string::npos) << d;                       // no surrogates
  EXPECT_NE(d.find("[\\xf4] [\\x80-\\x8f]"), std::string::npos) << d;               // up to U+10FFFF
  EXPECT_NE(d.find("| [\\x20-!#-\\x5b\\x5d-\\x7f]\n"), std::string::npos) << d;
}

}  // namespace
}  // namespace loragate::grammar
