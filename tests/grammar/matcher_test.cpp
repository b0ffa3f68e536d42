// Matcher: a pushdown automaton over bytes — acceptance, all-or-nothing
// advances, deep nesting without deep recursion, memoised transitions; and token masks,
// checked token by token against advancing the matcher by each token's bytes.
#include "grammar/matcher.h"

#include <gtest/gtest.h>

#include "grammar/gbnf.h"
#include "grammar/token_mask.h"
#include "tests/test_util.h"

namespace loragate::grammar {
namespace {

std::shared_ptr<const Grammar> gbnf_grammar(const char* text) {
  return std::make_shared<const Grammar>(parse_gbnf(text).value());
}

std::shared_ptr<const Grammar> comma_list() { return gbnf_grammar("root ::= \"a\" (\",a\")*"); }

std::shared_ptr<const Grammar> parens() { return gbnf_grammar("root ::= \"(\" root \")\" root | \"\""); }

std::shared_ptr<const Grammar> tiny_object() { return gbnf_grammar("root ::= \"{\\\"\" [a-z]+ \"\\\": \" [0-9]+ \"}\""); }

TEST(MatcherTest, AcceptsTheLanguageAndNothingElse) {
  const auto g = comma_list();
  EXPECT_TRUE(grammar_matches(g, "a"));
  EXPECT_TRUE(grammar_matches(g, "a,a,a"));
  EXPECT_FALSE(grammar_matches(g, ""));
  EXPECT_FALSE(grammar_matches(g, "a,"));
  EXPECT_FALSE(grammar_matches(g, "aa"));
  Matcher m(g);
  EXPECT_FALSE(m.accepts());
  EXPECT_TRUE(m.advance("a,a"));
  EXPECT_TRUE(m.accepts());
  EXPECT_TRUE(m.can_continue());
  EXPECT_FALSE(m.advance(",b"));  // all or nothing: the state is still after "a,a"
  EXPECT_TRUE(m.accepts());
  EXPECT_EQ(m.next_bytes().count(), 1u);
  EXPECT_TRUE(m.next_bytes().test(','));
}

TEST(MatcherTest, EndsWhenNothingCanFollow) {
  Matcher m(tiny_object());
  EXPECT_TRUE(m.advance("{\"ab\": 12"));
  EXPECT_FALSE(m.accepts());
  EXPECT_TRUE(m.advance("}"));
  EXPECT_TRUE(m.accepts());
  EXPECT_FALSE(m.can_continue());
}

TEST(MatcherTest, DeepNestingNeedsNoDeepRecursion) {
  const auto g = parens();
  std::string deep(20000, '(');
  deep += std::string(20000, ')');
  EXPECT_TRUE(grammar_matches(g, deep));
  EXPECT_FALSE(grammar_matches(g, deep + ")"));
  EXPECT_TRUE(grammar_matches(g, "(()())()"));
}

TEST(MatcherTest, TransitionsAreMemoisedAndStatesInterned) {
  Matcher m(comma_list());
  ASSERT_TRUE(m.advance("a,a"));
  const Matcher::StateId after_item = m.state_id();
  ASSERT_TRUE(m.advance(",a"));
  EXPECT_EQ(m.state_id(), after_item);  // the same stacks: the same state
  const size_t states = m.num_states();
  EXPECT_EQ(m.transition(after_item, ','), m.transition(after_item, ','));
  EXPECT_EQ(m.transition(after_item, 'x'), Matcher::kDead);
  EXPECT_EQ(m.num_states(), states);
}

// An expression grammar whose blanks may sit on either side of every
// operator keeps many parses alive; the matcher bounds them instead of
// spending seconds per byte (the fuzzer's regress-ambiguous-walk seed).
TEST(MatcherTest, AmbiguousGrammarsStayBounded) {
  auto g = parse_gbnf(
      "root ::= expr\n"
      "expr ::= term ( ws [-+] ws expr )*\n"
      "term ::= factor ( ws [*/] ws factor )*\n"
      "factor ::= number | \"(\" ws expr ws \")\"\n"
      "number ::= [0-9]+ ( \".\" [0-9]{1,6} )?\n"
      "ws ::= [ \\t]{0,4}?\n");
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  const auto grammar = std::make_shared<const Grammar>(std::move(g).value());
  EXPECT_TRUE(grammar_matches(grammar, "1+2*3"));
  Matcher m(grammar);
  std::string text = "1";
  for (int i = 0; i < 30; ++i) text += " + (2 * 3";
  const bool took = m.advance(text);
  EXPECT_TRUE(took || m.too_ambiguous());
  EXPECT_LT(m.num_states(), 100000u);
}

// Every token's bit must say whether the matcher can take that token's bytes.
void expect_mask_matches_brute_force(Matcher& m, const TokenVocabulary& vocab, const std::vector<bool>& special) {
  TokenMask mask;
  const Matcher::State before = m.state();
  compute_token_mask(m, vocab, &mask);
  EXPECT_EQ(m.state(), before);
  int allowed = 0;
  for (int32_t id = 0; id < vocab.size(); ++id) {
    Matcher probe(m);
    const bool fits = !special[static_cast<size_t>(id)] && !vocab.bytes(id).empty() && probe.advance(vocab.bytes(id));
    ASSERT_EQ(mask_test(mask, id), fits) << "token " << id << " '" << vocab.bytes(id) << "'";
    allowed += fits;
  }
  EXPECT_GT(allowed, 0);
}

TEST(TokenMaskTest, SmallVocabularyAgreesWithTheMatcher) {
  const std::vector<std::string> bytes = {"{", "{\"", "\"", "ab", "a", "\": ", ":", " ", "12", "1", "}", "}}", "", "x"};
  std::vector<bool> special(bytes.size(), false);
  special[13] = true;  // "x": special, never allowed
  TokenVocabulary vocab(bytes, special);
  Matcher m(tiny_object());
  expect_mask_matches_brute_force(m, vocab, special);
  for (const char* part : {"{\"", "ab", "\": ", "1"}) {
    ASSERT_TRUE(m.advance(part));
    expect_mask_matches_brute_force(m, vocab, special);
  }
}

// Cursors of one grammar share its automaton: the second meets the first's
// states and masks ready, and both carry on through a reset (which renumbers
// every state) by replaying what they consumed.
TEST(TokenMaskTest, CursorsShareAnAutomatonAndOutliveItsReset) {
  const std::vector<std::string> bytes = {"{", "{\"", "\"", "ab", "a", "\": ", ":", " ", "12", "1", "}", "}}"};
  TokenVocabulary vocab(bytes, std::vector<bool>(bytes.size(), false));
  auto automaton = std::make_shared<Automaton>(tiny_object());
  Matcher first(automaton), second(automaton);
  TokenMask mask;
  ASSERT_TRUE(first.advance("{\"ab\": "));
  compute_token_mask(first, vocab, &mask);
  const size_t states = automaton->num_states();
  ASSERT_TRUE(second.advance("{\"ab\": "));
  EXPECT_EQ(automaton->num_states(), states) << "the second cursor walked known transitions";
  EXPECT_EQ(second.state_id(), first.state_id());
  ASSERT_NE(second.cached_mask(second.state_id()), nullptr) << "and found the mask computed";
  EXPECT_EQ(*second.cached_mask(second.state_id()), mask);

  const uint64_t epoch = automaton->epoch();
  automaton->reset();
  EXPECT_EQ(automaton->epoch(), epoch + 1);
  EXPECT_EQ(second.cached_mask(second.state_id()), nullptr) << "a reset forgets the masks";
  EXPECT_FALSE(first.accepts());
  EXPECT_TRUE(first.next_bytes().test('7'));
  EXPECT_FALSE(first.next_bytes().test('}'));
  ASSERT_TRUE(first.advance("12}"));
  EXPECT_TRUE(first.accepts());
  ASSERT_TRUE(second.advance("1}"));
  EXPECT_TRUE(second.accepts());
  EXPECT_FALSE(second.advance("1")) << "and the replayed state still refuses what cannot follow";
}

TEST(TokenMaskTest, Qwen3VocabularyAgreesWithTheMatcher) {
  LG_REQUIRE_SHARED("tokenizers/qwen3/tokenizer.json");
  auto tok = Tokenizer::load(testing::shared_dir() + "/tokenizers/qwen3");
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  const auto vocab = TokenVocabulary::from_tokenizer(**tok);
  std::vector<bool> special(static_cast<size_t>(vocab->size()));
  for (int32_t id = 0; id < vocab->size(); ++id) special[static_cast<size_t>(id)] = (*tok)->is_special(id);
  Matcher m(tiny_object());
  expect_mask_matches_brute_force(m, *vocab, special);
  ASSERT_TRUE(m.advance("{\"name"));
  expect_mask_matches_brute_force(m, *vocab, special);
  ASSERT_TRUE(m.advance("\": 4"));
  expect_mask_matches_brute_force(m, *vocab, special);
}

}  // namespace
}  // namespace loragate::grammar
