// The prompts of `loragate bench serve` for a prefix cache: the shared system
// prompt, the user turns and the multi-turn replay's growth (bench/serve_prompts.h).
#include "bench/serve_prompts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>

namespace loragate::bench {
namespace {

ServeBenchOptions id_options(int prefix, int prompt_len, uint64_t seed = 5) {
  ServeBenchOptions o;
  o.token_ids = true;
  o.vocab = 1000;
  o.shared_prefix_len = prefix;
  o.prompt_len = prompt_len;
  o.seed = seed;
  return o;
}

bool starts_with(const std::vector<int32_t>& v, const std::vector<int32_t>& prefix) {
  return v.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), v.begin());
}

int word_count(const std::string& text) {
  std::istringstream in(text);
  int n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

TEST(ServePromptsTest, EveryFirstTurnStartsWithTheSharedPrefix) {
  const ServePrompts p(id_options(40, 7));
  const std::vector<int32_t>& prefix = p.shared_prefix().ids;
  ASSERT_EQ(prefix.size(), 40u);
  for (const int32_t id : prefix) {
    EXPECT_GE(id, 3);
    EXPECT_LT(id, 1000);
  }
  std::set<std::vector<int32_t>> tails;
  for (int c = 0; c < 6; ++c) {
    const BenchPrompt first = p.first(c);
    ASSERT_EQ(first.ids.size(), 47u);
    EXPECT_TRUE(starts_with(first.ids, prefix)) << c;
    const std::vector<int32_t> tail(first.ids.begin() + 40, first.ids.end());
    EXPECT_EQ(tail, p.user_turn(c, 0).ids);
    tails.insert(tail);
    EXPECT_TRUE(first.text.empty());
  }
  EXPECT_EQ(tails.size(), 6u);  // the user turns differ between conversations

  // Fixed by the seed: the same options give the same prefix, another seed another one.
  EXPECT_EQ(ServePrompts(id_options(40, 7)).shared_prefix().ids, prefix);
  EXPECT_NE(ServePrompts(id_options(40, 7, 6)).shared_prefix().ids, prefix);
  // The prefix is not any conversation's user turn.
  EXPECT_NE(std::vector<int32_t>(prefix.begin(), prefix.begin() + 7), p.user_turn(0, 0).ids);
}

TEST(ServePromptsTest, WithoutAPrefixTheFirstTurnIsTheUserTurn) {
  const ServePrompts p(id_options(0, 9));
  EXPECT_TRUE(p.shared_prefix().ids.empty());
  EXPECT_EQ(p.first(3).ids, p.user_turn(3, 0).ids);
  EXPECT_NE(p.user_turn(3, 0).ids, p.user_turn(3, 1).ids);  // a later turn says something new
  EXPECT_NE(p.user_turn(3, 1).ids, p.user_turn(4, 1).ids);
}

TEST(ServePromptsTest, WordPromptsJoinWithOneSpace) {
  ServeBenchOptions o = id_options(12, 5);
  o.token_ids = false;
  const ServePrompts p(o);
  const std::string& prefix = p.shared_prefix().text;
  EXPECT_EQ(word_count(prefix), 12);
  EXPECT_TRUE(p.shared_prefix().ids.empty());
  const BenchPrompt first = p.first(2);
  EXPECT_EQ(first.text, prefix + " " + p.user_turn(2, 0).text);
  EXPECT_EQ(word_count(first.text), 17);
  EXPECT_EQ(first.text.find("  "), std::string::npos);
}

TEST(ServePromptsTest, EachTurnExtendsThePreviousWithItsAnswerInIds) {
  const ServePrompts p(id_options(16, 4));
  BenchPrompt prompt = p.first(1);
  for (int turn = 1; turn <= 4; ++turn) {
    TurnAnswer answer;
    answer.ids = {900 + turn, 901, 902};
    answer.text = "ignored when the ids are there";
    const BenchPrompt next = p.next(prompt, answer, 1, turn);
    ASSERT_EQ(next.ids.size(), prompt.ids.size() + 3 + 4) << turn;
    EXPECT_TRUE(starts_with(next.ids, prompt.ids));
    EXPECT_EQ(std::vector<int32_t>(next.ids.begin() + static_cast<ptrdiff_t>(prompt.ids.size()),
                                   next.ids.begin() + static_cast<ptrdiff_t>(prompt.ids.size()) + 3),
              answer.ids);
    EXPECT_EQ(std::vector<int32_t>(next.ids.end() - 4, next.ids.end()), p.user_turn(1, turn).ids);
    EXPECT_TRUE(starts_with(next.ids, p.shared_prefix().ids));
    prompt = next;
  }
  EXPECT_EQ(prompt.ids.size(), 16u + 4 + 4 * (3 + 4));
}

TEST(ServePromptsTest, AnAnswerWithoutIdsExtendsIdPromptsByItsWords) {
  const ServePrompts p(id_options(0, 3));
  const BenchPrompt first = p.first(0);
  TurnAnswer answer;
  answer.text = " once upon\ta time";
  const BenchPrompt next = p.next(first, answer, 0, 1);
  const std::vector<int32_t> said = words_as_ids(answer.text, 1000);
  ASSERT_EQ(said.size(), 4u);
  std::vector<int32_t> want = first.ids;
  want.insert(want.end(), said.begin(), said.end());
  const std::vector<int32_t> turn = p.user_turn(0, 1).ids;
  want.insert(want.end(), turn.begin(), turn.end());
  EXPECT_EQ(next.ids, want);
}

TEST(ServePromptsTest, TextAnswersContinueTheTextAsGenerated) {
  ServeBenchOptions o = id_options(6, 3);
  o.token_ids = false;
  const ServePrompts p(o);
  const BenchPrompt first = p.first(4);
  TurnAnswer answer;
  answer.text = " the end.";
  const BenchPrompt second = p.next(first, answer, 4, 1);
  EXPECT_EQ(second.text, first.text + " the end. " + p.user_turn(4, 1).text);
  answer.text = "";  // an empty answer still leaves one space before the next turn
  EXPECT_EQ(p.next(second, answer, 4, 2).text, second.text + " " + p.user_turn(4, 2).text);
}

TEST(WordsAsIdsTest, OneIdPerWordInRangeAndStable) {
  EXPECT_TRUE(words_as_ids("", 100).empty());
  EXPECT_TRUE(words_as_ids(" \n\t ", 100).empty());
  const std::vector<int32_t> a = words_as_ids("alpha beta alpha", 100);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0], a[2]);
  EXPECT_EQ(a, words_as_ids("  alpha\nbeta   alpha ", 100));
  for (const int32_t id : words_as_ids("a b c d e f g h i j k l m n o p", 10)) {
    EXPECT_GE(id, 3);
    EXPECT_LT(id, 10);
  }
  std::set<int32_t> distinct;
  for (const int32_t id : words_as_ids("w0 w1 w2 w3 w4 w5 w6 w7 w8 w9", 32000)) distinct.insert(id);
  EXPECT_GE(distinct.size(), 9u);  // a hash, not a constant
}

}  // namespace
}  // namespace loragate::bench
