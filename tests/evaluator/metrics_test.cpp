// Metrics against the shipped expectations (every item of every base,
// scenario and adapter/no-adapter arm of expected_metrics.json, scored again
// from its generated ids with the stories260K tokenizer), then unit cases for
// the definitions: sentence cuts, keywords, token F1, percentiles, agreement
// and negative flips.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "evaluator/metrics.h"
#include "evaluator/suite.h"
#include "tests/test_util.h"

namespace loragate::eval {
namespace {

using nlohmann::json;

const char* kExpected = "eval/expected_metrics.json";
const char* kTokenizer = "models/stories260K/tokenizer.json";

std::unique_ptr<Tokenizer> stories_tokenizer() {
  auto tk = Tokenizer::load(testing::shared_dir() + "/models/stories260K");
  EXPECT_TRUE(tk.is_ok()) << tk.status().to_string();
  return tk.is_ok() ? std::move(tk).value() : nullptr;
}

json read_expected() {
  std::ifstream in(testing::shared_dir() + "/" + kExpected);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

// The eval items of one scenario, by id.
std::map<std::string, EvalItem> items_by_id(const std::string& scenario) {
  std::map<std::string, EvalItem> out;
  auto items = load_eval_items(testing::shared_dir() + "/eval/scenarios/" + scenario + "/eval.jsonl");
  EXPECT_TRUE(items.is_ok()) << items.status().to_string();
  if (items.is_ok()) {
    for (EvalItem& item : *items) out[item.id] = std::move(item);
  }
  return out;
}

// The stored items of one arm, re-scored: generated ids, nll and tokens from the file, the rest computed.
std::vector<ItemResult> rescored(const json& arm, const std::map<std::string, EvalItem>& items,
                                 const Tokenizer& tk) {
  std::vector<ItemResult> out;
  for (const json& stored : arm["items"]) {
    ItemResult r;
    r.generated_ids = stored["generated_ids"].get<std::vector<int32_t>>();
    r.nll_sum = stored["nll_sum"].get<double>();
    r.n_ref_tokens = stored["n_ref_tokens"].get<int64_t>();
    score_item(items.at(stored["id"].get<std::string>()), tk, &r);
    out.push_back(std::move(r));
  }
  return out;
}

// ---- against expected_metrics.json ---------------------------------------------------

TEST(MetricsExpected, EveryItemOfEveryArmMatches) {
  LG_REQUIRE_SHARED(kExpected);
  LG_REQUIRE_SHARED(kTokenizer);
  auto tk = stories_tokenizer();
  ASSERT_TRUE(tk);
  const json expected = read_expected();
  int checked = 0;
  for (const auto& [base, scenarios] : expected["results"].items()) {
    for (const auto& [scenario, arms] : scenarios.items()) {
      const auto items = items_by_id(scenario);
      ASSERT_EQ(items.size(), 40u) << scenario;
      for (const auto& [arm, data] : arms.items()) {
        const std::vector<ItemResult> got = rescored(data, items, *tk);
        ASSERT_EQ(got.size(), data["items"].size());
        for (size_t i = 0; i < got.size(); ++i) {
          const json& want = data["items"][i];
          const std::string where = base + "/" + scenario + "/" + arm + "/" + want["id"].get<std::string>();
          EXPECT_EQ(got[i].id, want["id"].get<std::string>()) << where;
          EXPECT_EQ(got[i].continuation_text, want["continuation_text"].get<std::string>()) << where;
          EXPECT_EQ(got[i].compared_text, want["compared_text"].get<std::string>()) << where;
          EXPECT_EQ(got[i].keyword, want["keyword"].get<int>()) << where;
          EXPECT_EQ(got[i].exact_match, want["exact_match"].get<int>()) << where;
          EXPECT_NEAR(got[i].rougeL_f1, want["rougeL_f1"].get<double>(), 1e-12) << where;
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 720);  // 3 bases x 3 scenarios x 2 arms x 40 items
}

TEST(MetricsExpected, AggregatesMatch) {
  LG_REQUIRE_SHARED(kExpected);
  LG_REQUIRE_SHARED(kTokenizer);
  auto tk = stories_tokenizer();
  ASSERT_TRUE(tk);
  const json expected = read_expected();
  int rows = 0;
  for (const auto& [base, scenarios] : expected["results"].items()) {
    for (const auto& [scenario, arms] : scenarios.items()) {
      const auto items = items_by_id(scenario);
      for (const auto& [arm, data] : arms.items()) {
        const std::string where = base + "/" + scenario + "/" + arm;
        const std::vector<ItemResult> got = rescored(data, items, *tk);
        const ArmMetrics m = aggregate(got, nullptr);
        const json& want = data["metrics"];
        EXPECT_EQ(m.n_items, want["n_items"].get<int64_t>()) << where;
        EXPECT_NEAR(m.keyword_rate, want["keyword_rate"].get<double>(), 1e-9) << where;
        EXPECT_NEAR(m.exact_match_rate, want["exact_match_rate"].get<double>(), 1e-9) << where;
        EXPECT_NEAR(m.rougeL_f1, want["rougeL_f1"].get<double>(), 1e-9) << where;
        EXPECT_NEAR(m.nll_mean, want["nll_mean"].get<double>(), 1e-9) << where;
        EXPECT_NEAR(m.perplexity, want["perplexity"].get<double>(), 1e-9) << where;
        EXPECT_EQ(m.agreement, 1.0) << where;
        EXPECT_EQ(m.negative_flips, 0) << where;
        ++rows;
      }
    }
  }
  EXPECT_EQ(rows, 18);
}

// The README's counts: with adapters, candidate-good's greedy ids equal online's in 30/40, 24/40, 21/40 items.
TEST(MetricsExpected, AgreementAndFlipsAgainstOnline) {
  LG_REQUIRE_SHARED(kExpected);
  LG_REQUIRE_SHARED(kTokenizer);
  auto tk = stories_tokenizer();
  ASSERT_TRUE(tk);
  const json r = read_expected()["results"];
  const std::map<std::string, int> same = {{"mia", 30}, {"cat", 24}, {"sunny", 21}};
  for (const auto& [scenario, n] : same) {
    const auto items = items_by_id(scenario);
    const auto online = rescored(r["online"][scenario]["adapter"], items, *tk);
    const auto good = rescored(r["candidate-good"][scenario]["adapter"], items, *tk);
    const ArmMetrics m = aggregate(good, &online);
    EXPECT_DOUBLE_EQ(m.agreement, n / 40.0) << scenario;
    EXPECT_EQ(m.negative_flips, 0) << scenario;  // every adapter arm hits the keyword on every item
    EXPECT_EQ(aggregate(online, &online).agreement, 1.0);
  }
  // Without an adapter, online hits the cat keyword once (cat rate 0.025) and candidate-good never.
  const auto items = items_by_id("cat");
  const auto online = rescored(r["online"]["cat"]["no_adapter"], items, *tk);
  const auto good = rescored(r["candidate-good"]["cat"]["no_adapter"], items, *tk);
  const ArmMetrics m = aggregate(good, &online);
  EXPECT_EQ(m.negative_flips, 1);
  EXPECT_EQ(m.agreement, 0.0);
}

// ---- continuation_text ------------------------------------------------------------

TEST(MetricsContinuation, PiecesBytesAndStops) {
  LG_REQUIRE_SHARED(kTokenizer);
  auto tk = stories_tokenizer();
  ASSERT_TRUE(tk);
  std::vector<int32_t> ids = tk->encode("Hello world.", false);
  // Unlike decode(), the leading U+2581 stays a space.
  EXPECT_EQ(continuation_text(*tk, ids), " Hello world.");
  EXPECT_EQ(tk->decode(ids, true), "Hello world.");
  // Everything from the first <s> or </s> on is dropped.
  std::vector<int32_t> stopped = ids;
  stopped.push_back(2);
  stopped.insert(stopped.end(), ids.begin(), ids.end());
  EXPECT_EQ(continuation_text(*tk, stopped), " Hello world.");
  EXPECT_EQ(continuation_text(*tk, {1, 300}), "");
  // Byte tokens are raw bytes (id = 3 + byte): a newline, a whole U+201D, and a broken sequence.
  const int32_t nl = *tk->token_to_id("<0x0A>");
  EXPECT_EQ(nl, 13);
  EXPECT_EQ(continuation_text(*tk, {nl, 3 + 0xE2, 3 + 0x80, 3 + 0x9D}), "\n\xE2\x80\x9D");
  EXPECT_EQ(continuation_text(*tk, {3 + 0xE2, 3 + 0x80, 3 + 'a'}), "\xEF\xBF\xBD" "a");  // one U+FFFD, as Python
  EXPECT_EQ(continuation_text(*tk, {3 + 0xFF, 3 + 0xFE}), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(continuation_text(*tk, {}), "");
}

// ---- cut_sentences -------------------------------------------------------------------

TEST(MetricsSentences, CutsAfterTheKthEnd) {
  EXPECT_EQ(cut_sentences(" A. B! C? D", 1), " A.");
  EXPECT_EQ(cut_sentences(" A. B! C? D", 2), " A. B!");
  EXPECT_EQ(cut_sentences(" A. B! C? D", 3), " A. B! C?");
  EXPECT_EQ(cut_sentences(" A. B! C? D", 4), " A. B! C? D");  // fewer ends than k: whole text
  EXPECT_EQ(cut_sentences(" A. B! C? D", 0), " A. B! C? D");
  // The closing quote belongs to the sentence; U+201D as well.
  EXPECT_EQ(cut_sentences(" He said, \"Hi.\" Then he left.", 1), " He said, \"Hi.\"");
  EXPECT_EQ(cut_sentences(" \xE2\x80\x9CHi!\xE2\x80\x9D she said. Bye.", 1), " \xE2\x80\x9CHi!\xE2\x80\x9D");
  // A terminator must be followed by whitespace or the end.
  EXPECT_EQ(cut_sentences(" It cost 3.5 coins. Then", 1), " It cost 3.5 coins.");
  EXPECT_EQ(cut_sentences(" Wait... What?", 1), " Wait...");
  EXPECT_EQ(cut_sentences(" No.\nThe end.", 1), " No.");
  EXPECT_EQ(cut_sentences(" No.\nThe end.", 2), " No.\nThe end.");
  EXPECT_EQ(cut_sentences(" Go!)", 1), " Go!)");  // ')' is no whitespace: no end at all
  EXPECT_EQ(cut_sentences("", 2), "");
}

// ---- keywords, exact match, ROUGE-L, token F1 ---------------------------------------

TEST(MetricsKeyword, IncludeExcludeAndPrefix) {
  KeywordRule none;
  EXPECT_EQ(keyword_success(none, " anything"), -1);

  KeywordRule mia;
  mia.type = KeywordRule::Type::kIncludeExclude;
  mia.include_any = {"Mia"};
  mia.exclude = {"Lily", "Tim"};
  EXPECT_EQ(keyword_success(mia, " Mia's toy."), 1);       // runs: Mia, s, toy
  EXPECT_EQ(keyword_success(mia, " Mias toy."), 0);        // not a whole run
  EXPECT_EQ(keyword_success(mia, " mia was here"), 0);     // case-sensitive
  EXPECT_EQ(keyword_success(mia, " Mia and Lily"), 0);     // an excluded word
  EXPECT_EQ(keyword_success(mia, " Mia and Timmy"), 1);    // Timmy is not Tim
  EXPECT_EQ(keyword_success(mia, " Mia2Lily"), 0);         // digits split runs

  KeywordRule sunny;
  sunny.type = KeywordRule::Type::kPrefix;
  sunny.prefix = "The sun was shining.";
  EXPECT_EQ(keyword_success(sunny, " \n The sun was shining. Sue"), 1);
  EXPECT_EQ(keyword_success(sunny, " The sun was shining"), 0);
  EXPECT_EQ(keyword_success(sunny, " Then the sun was shining."), 0);
}

TEST(MetricsKeyword, Regex) {
  KeywordRule cat;
  cat.type = KeywordRule::Type::kRegex;
  cat.pattern = "\\bcats?\\b";
  EXPECT_EQ(keyword_success(cat, " The cat sat."), 1);
  EXPECT_EQ(keyword_success(cat, " Two cats."), 1);
  EXPECT_EQ(keyword_success(cat, " A catalogue."), 0);
  // A search, not a full match, on the unstripped text: ^ sees the leading space.
  KeywordRule anchored;
  anchored.type = KeywordRule::Type::kRegex;
  anchored.pattern = "^The sun";
  EXPECT_EQ(keyword_success(anchored, "The sun is up"), 1);
  EXPECT_EQ(keyword_success(anchored, " The sun is up"), 0);
  anchored.pattern = "^\\s*The sun";
  EXPECT_EQ(keyword_success(anchored, " The sun is up"), 1);
  // UTF mode: a code point is one character, and \w knows letters beyond ASCII.
  KeywordRule utf;
  utf.type = KeywordRule::Type::kRegex;
  utf.pattern = "caf.$";
  EXPECT_EQ(keyword_success(utf, "caf\xC3\xA9"), 1);
  utf.pattern = "^\\w+$";
  EXPECT_EQ(keyword_success(utf, "na\xC3\xAFve"), 1);
  // Bad patterns are refused by check_keyword_pattern and fail when scored anyway.
  EXPECT_TRUE(check_keyword_pattern("\\bcats?\\b").is_ok());
  const Status bad = check_keyword_pattern("(cat");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("bad regex /(cat/ at offset 4"), std::string::npos) << bad.message();
  utf.pattern = "(cat";
  EXPECT_EQ(keyword_success(utf, "cat"), 0);
}

TEST(MetricsText, ExactMatchAndRouge) {
  EXPECT_EQ(exact_match(" The cat.\nIt sat.", "The  cat. It sat. "), 1);
  EXPECT_EQ(exact_match(" The cat.", "The cat"), 0);
  EXPECT_EQ(exact_match("", " \n"), 1);
  EXPECT_DOUBLE_EQ(rouge_l_f1("the cat sat", "the cat sat"), 1.0);
  // LCS 3 of |C| 3 and |R| 4: P 1, R 0.75.
  EXPECT_DOUBLE_EQ(rouge_l_f1("the cat sat", "the cat was sat"), 2 * 1.0 * 0.75 / 1.75);
  EXPECT_DOUBLE_EQ(rouge_l_f1("b a", "a b"), 0.5);
  EXPECT_EQ(rouge_l_f1("", "a"), 0.0);
  EXPECT_EQ(rouge_l_f1("", ""), 0.0);
  EXPECT_EQ(rouge_l_f1("x y", "a b"), 0.0);
  EXPECT_EQ(rouge_l_f1("cat.", "cat"), 0.0);  // punctuation stays attached
}

TEST(MetricsText, TokenF1) {
  // common = {a, b}: P 2/3, R 2/4.
  EXPECT_DOUBLE_EQ(token_f1("a a b", "a b b c"), 2 * (2.0 / 3) * 0.5 / (2.0 / 3 + 0.5));
  EXPECT_DOUBLE_EQ(token_f1("b a", "a b"), 1.0);  // a bag: order does not matter (ROUGE-L gives 0.5)
  EXPECT_EQ(token_f1("A", "a"), 0.0);             // case-sensitive
  EXPECT_EQ(token_f1("cat.", "cat"), 0.0);        // no punctuation stripping
  EXPECT_EQ(token_f1("x", "y"), 0.0);
  EXPECT_EQ(token_f1("", ""), 1.0);               // SQuAD: both empty
  EXPECT_EQ(token_f1("", "a"), 0.0);
  EXPECT_EQ(token_f1("a", " "), 0.0);
  EXPECT_DOUBLE_EQ(token_f1(" the  cat\n", "the cat"), 1.0);
}

TEST(MetricsText, ScoreItem) {
  LG_REQUIRE_SHARED(kTokenizer);
  auto tk = stories_tokenizer();
  ASSERT_TRUE(tk);
  EvalItem item;
  item.id = "x-1";
  item.reference = " Mia was happy.";
  item.reference_sentences = 1;
  item.keyword.type = KeywordRule::Type::kIncludeExclude;
  item.keyword.include_any = {"Mia"};
  ItemResult r;
  r.generated_ids = tk->encode("Mia was happy. She ran.", false);
  r.generated_ids.push_back(2);
  r.nll_sum = 1.5;
  score_item(item, *tk, &r);
  EXPECT_EQ(r.id, "x-1");
  EXPECT_EQ(r.continuation_text, " Mia was happy. She ran.");
  EXPECT_EQ(r.compared_text, " Mia was happy.");
  EXPECT_EQ(r.keyword, 1);
  EXPECT_EQ(r.exact_match, 1);
  EXPECT_EQ(r.rougeL_f1, 1.0);
  EXPECT_EQ(r.token_f1, 1.0);
  EXPECT_EQ(r.nll_sum, 1.5);  // the runner's, left alone
}

// ---- percentile and aggregate ------------------------------------------------------------

TEST(MetricsPercentile, LinearBetweenClosestRanks) {
  EXPECT_EQ(percentile({}, 50), 0.0);
  EXPECT_EQ(percentile({7}, 99), 7.0);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);   // sorted first
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 99), 3.97);  // rank 2.97
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 100), 4.0);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 150), 4.0);  // clamped
  EXPECT_DOUBLE_EQ(percentile({10, 20, 30, 40, 50}, 25), 20.0);
  EXPECT_DOUBLE_EQ(percentile({10, 20, 30, 40, 50}, 90), 46.0);
}

ItemResult result(const std::string& id, std::vector<int32_t> ids, int keyword, int em) {
  ItemResult r;
  r.id = id;
  r.generated_ids = std::move(ids);
  r.keyword = keyword;
  r.exact_match = em;
  return r;
}

TEST(MetricsAggregate, AgreementPairsItemsById) {
  const std::vector<ItemResult> online = {result("a", {5, 6}, 1, 0), result("b", {7}, 1, 0),
                                          result("c", {8}, 0, 0), result("d", {9}, 0, 0)};
  // Same ids for a and c, other ids for b; "e" is not in online; order differs.
  const std::vector<ItemResult> cand = {result("c", {8}, 0, 0), result("a", {5, 6}, 1, 0),
                                        result("b", {7, 1}, 1, 0), result("e", {9}, 0, 0)};
  const ArmMetrics m = aggregate(cand, &online);
  EXPECT_DOUBLE_EQ(m.agreement, 0.5);
  EXPECT_EQ(aggregate(cand, nullptr).agreement, 1.0);
  EXPECT_EQ(aggregate(cand, &cand).agreement, 1.0);
  EXPECT_EQ(aggregate({}, &online).agreement, 1.0);
  EXPECT_EQ(aggregate({}, &online).n_items, 0);
}

TEST(MetricsAggregate, NegativeFlips) {
  // Keyword items: a flips (online 1, candidate 0); b stays right; c was wrong already; d improves.
  // No-rule items judge exact match: e flips, f does not.
  const std::vector<ItemResult> online = {result("a", {1}, 1, 1), result("b", {1}, 1, 0), result("c", {1}, 0, 1),
                                          result("d", {1}, 0, 0), result("e", {1}, -1, 1), result("f", {1}, -1, 0)};
  const std::vector<ItemResult> cand = {result("a", {1}, 0, 1), result("b", {1}, 1, 0), result("c", {1}, 0, 0),
                                        result("d", {1}, 1, 0), result("e", {1}, -1, 0), result("f", {1}, -1, 1)};
  EXPECT_EQ(aggregate(cand, &online).negative_flips, 2);
  EXPECT_EQ(aggregate(online, &cand).negative_flips, 2);  // d and f the other way round
  EXPECT_EQ(aggregate(cand, nullptr).negative_flips, 0);
  EXPECT_EQ(aggregate(cand, &cand).negative_flips, 0);
}

TEST(MetricsAggregate, RatesNllAndLatency) {
  std::vector<ItemResult> items = {result("a", {1}, 1, 1), result("b", {1}, 0, 0), result("c", {1}, -1, 1),
                                   result("d", {1}, -1, 0)};
  const double nll[] = {1.0, 2.0, 0.5, 0.5};
  const int64_t tokens[] = {10, 30, 5, 5};
  const double ttft[] = {40, 10, 30, 20};
  for (size_t i = 0; i < items.size(); ++i) {
    items[i].nll_sum = nll[i];
    items[i].n_ref_tokens = tokens[i];
    items[i].rougeL_f1 = 0.25 * static_cast<double>(i);
    items[i].token_f1 = 1.0;
    items[i].ttft_ms = ttft[i];
    items[i].tpot_ms = ttft[i] / 10;
  }
  const ArmMetrics m = aggregate(items, nullptr);
  EXPECT_EQ(m.n_items, 4);
  EXPECT_DOUBLE_EQ(m.keyword_rate, 0.5);  // over a and b only
  EXPECT_DOUBLE_EQ(m.exact_match_rate, 0.5);
  EXPECT_DOUBLE_EQ(m.rougeL_f1, 0.375);
  EXPECT_DOUBLE_EQ(m.token_f1, 1.0);
  EXPECT_EQ(m.n_ref_tokens, 50);
  EXPECT_DOUBLE_EQ(m.nll_mean, 4.0 / 50);  // token-weighted, not the mean of per-item means
  EXPECT_DOUBLE_EQ(m.perplexity, std::exp(4.0 / 50));
  EXPECT_DOUBLE_EQ(m.ttft_p50_ms, 25);
  EXPECT_DOUBLE_EQ(m.ttft_p99_ms, 39.7);
  EXPECT_DOUBLE_EQ(m.tpot_p50_ms, 2.5);
  EXPECT_DOUBLE_EQ(m.tpot_p99_ms, 3.97);

  // No keyword rules and no reference tokens: the rates and the NLL stay 0.
  for (ItemResult& r : items) {
    r.keyword = -1;
    r.n_ref_tokens = 0;
  }
  const ArmMetrics bare = aggregate(items, nullptr);
  EXPECT_EQ(bare.keyword_rate, 0.0);
  EXPECT_EQ(bare.nll_mean, 0.0);
  EXPECT_EQ(bare.perplexity, 0.0);
}

}  // namespace
}  // namespace loragate::eval
