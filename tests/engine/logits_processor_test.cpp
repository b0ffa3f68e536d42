// Logit processing: LogitsProcessor's arithmetic against hand-computed rows,
// and on the real stories260K model that the engine applies it per sequence
// (penalties from the sequence's own output, min_tokens, bans and forcing)
// without breaking batch invariance.
#include "engine/logits_processor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/engine.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<float> processed_row(const SamplingParams& p, const std::vector<int32_t>& prompt,
                                 const std::vector<int32_t>& outputs, const std::vector<float>& logits,
                                 const std::vector<int32_t>& eos = {}) {
  LogitsProcessor lp(p, prompt);
  for (int32_t t : outputs) lp.observe(t, eos);
  const float* row = lp.apply(logits.data(), static_cast<int64_t>(logits.size()),
                              static_cast<int64_t>(outputs.size()), eos);
  return {row, row + logits.size()};
}

TEST(LogitsProcessorTest, BiasAddsBansAtMinus100AndForcesAt100) {
  SamplingParams p;
  p.logit_bias = {{1, 2.5f}, {3, -100.0f}};
  EXPECT_EQ(processed_row(p, {}, {}, {1, 2, 3, 4}), (std::vector<float>{1, 4.5f, 3, kNegInf}));
  p.logit_bias = {{0, 100.0f}, {2, 100.0f}, {1, -3.0f}};
  EXPECT_EQ(processed_row(p, {}, {}, {1, 2, 3, 4}), (std::vector<float>{101, kNegInf, 103, kNegInf}));
}

TEST(LogitsProcessorTest, PenaltiesFollowVllm) {
  SamplingParams p;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  // Token 1 generated twice, token 2 once; the prompt's token 3 is not penalised by these.
  EXPECT_EQ(processed_row(p, {3}, {1, 2, 1}, {1, 1, 1, 1}),
            (std::vector<float>{1, 1 - 1.0f - 0.25f, 1 - 0.5f - 0.25f, 1}));
  SamplingParams r;
  r.repetition_penalty = 2.0f;
  // Prompt and output tokens alike: a positive logit is divided, a negative one multiplied.
  EXPECT_EQ(processed_row(r, {0, 1}, {2}, {4, -4, 6, 8}), (std::vector<float>{2, -8, 3, 8}));
}

TEST(LogitsProcessorTest, MinTokensBansEosUntilReached) {
  SamplingParams p;
  p.min_tokens = 2;
  const std::vector<float> logits{1, 2, 3};
  EXPECT_EQ(processed_row(p, {}, {0}, logits, {2}), (std::vector<float>{1, 2, kNegInf}));
  EXPECT_EQ(processed_row(p, {}, {0, 1}, logits, {2}), logits);
}

TEST(LogitsProcessorTest, ARowWithEveryTokenBannedFallsBackToTheModelsLogits) {
  SamplingParams p;
  p.logit_bias = {{0, -100.0f}, {1, -100.0f}};
  EXPECT_EQ(processed_row(p, {}, {}, {5, 6}), (std::vector<float>{5, 6}));
}

TEST(LogitsProcessorTest, ValidateNamesTheField) {
  SamplingParams p;
  p.presence_penalty = 2.5f;
  EXPECT_EQ(p.validate().message().rfind("presence_penalty", 0), 0u) << p.validate().message();
  p = {};
  p.repetition_penalty = 0.0f;
  EXPECT_EQ(p.validate().message().rfind("repetition_penalty", 0), 0u);
  p = {};
  p.logit_bias = {{1, 101.0f}};
  EXPECT_EQ(p.validate().message().rfind("logit_bias", 0), 0u);
  p = {};
  p.max_tokens = 4;
  p.min_tokens = 5;
  EXPECT_EQ(p.validate().message().rfind("min_tokens", 0), 0u);
  p.min_tokens = 4;
  EXPECT_TRUE(p.validate().is_ok());
}

// A grammar over a four-token vocabulary: root ::= "ab" "c"
std::shared_ptr<const grammar::TokenVocabulary> abc_vocabulary() {
  return std::make_shared<const grammar::TokenVocabulary>(std::vector<std::string>{"a", "b", "c", "ab"},
                                                          std::vector<bool>(4, false));
}
std::shared_ptr<const grammar::Grammar> ab_then(uint8_t last) {
  grammar::GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  b.add_alternative(root, {grammar::Element::byte('a'), grammar::Element::byte('b'), grammar::Element::byte(last)});
  return std::make_shared<const grammar::Grammar>(b.build(root).value());
}

TEST(LogitsProcessorTest, TheGrammarMaskComesFirstAndIsNeverLiftedByTheFallback) {
  SamplingParams p;
  p.grammar = ab_then('c');
  p.logit_bias = {{0, -100.0f}, {3, -100.0f}};  // bans both tokens the grammar allows first
  LogitsProcessor lp(p, {});
  lp.constrain(abc_vocabulary());
  const std::vector<float> logits{1, 2, 3, 4, 5};  // id 4: beyond the tokenizer, never allowed
  const float* row = lp.apply(logits.data(), 5, 0, {});
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(std::vector<float>(row, row + 5), (std::vector<float>{1, kNegInf, kNegInf, 4, kNegInf}));
  EXPECT_TRUE(lp.observe(3, {}));  // "ab"
  EXPECT_FALSE(lp.grammar_complete());
  EXPECT_FALSE(lp.observe(0, {}));  // "a" cannot follow "ab"
  EXPECT_TRUE(lp.observe(2, {}));
  EXPECT_TRUE(lp.grammar_complete());
}

TEST(LogitsProcessorTest, EosIsAllowedOnlyOnceTheGrammarAccepts) {
  SamplingParams p;
  p.grammar = ab_then('c');
  LogitsProcessor lp(p, {});
  lp.constrain(abc_vocabulary());
  const std::vector<float> logits{1, 2, 3, 4, 9};
  EXPECT_EQ(lp.apply(logits.data(), 5, 0, {4})[4], kNegInf);
  ASSERT_TRUE(lp.observe(3, {4}) && lp.observe(2, {4}));
  EXPECT_EQ(lp.apply(logits.data(), 5, 2, {4})[4], 9);
}

TEST(LogitsProcessorTest, AGrammarTheVocabularyCannotFollowGivesNoRow) {
  SamplingParams p;
  p.grammar = ab_then('z');
  LogitsProcessor lp(p, {});
  lp.constrain(abc_vocabulary());
  const std::vector<float> logits{1, 2, 3, 4};
  ASSERT_TRUE(lp.observe(3, {}));
  EXPECT_EQ(lp.apply(logits.data(), 4, 1, {}), nullptr);
}

class EngineLogitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
    auto e = Engine::load(testing::shared_dir() + "/models/stories260K", EngineOptions{});
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    engine_ = std::move(e).value();
  }

  GenerationRequest greedy(const std::vector<int32_t>& prompt, int max_tokens) {
    GenerationRequest r;
    r.prompt_ids = prompt;
    r.params.temperature = 0.0f;
    r.params.max_tokens = max_tokens;
    return r;
  }
  std::vector<int32_t> prompt(const std::string& text) { return engine_->tokenizer()->encode(text, true); }
  GenerationResult run(const GenerationRequest& r) {
    auto out = engine_->generate({r});
    EXPECT_TRUE(out.is_ok()) << out.status().to_string();
    return out.is_ok() ? out->front() : GenerationResult{};
  }

  std::unique_ptr<Engine> engine_;
};

// Frequency and presence penalties are additive, so each greedy step must equal a one-token
// request whose prompt is everything so far and whose logit_bias is the penalty its output earned.
TEST_F(EngineLogitsTest, PenaltiesComeFromTheSequencesOwnOutputStepByStep) {
  GenerationRequest r = greedy(prompt("Once upon a time"), 64);
  r.params.frequency_penalty = 1.5f;
  r.params.presence_penalty = 0.5f;
  const GenerationResult penalised = run(r);
  ASSERT_EQ(penalised.output_ids.size(), 64u);
  EXPECT_NE(penalised.output_ids, run(greedy(r.prompt_ids, 64)).output_ids) << "the penalties changed nothing";
  std::map<int32_t, int> counts;
  std::vector<int32_t> so_far = r.prompt_ids;
  for (int32_t token : penalised.output_ids) {
    GenerationRequest step = greedy(so_far, 1);
    for (const auto& [t, c] : counts) step.params.logit_bias.emplace_back(t, -(1.5f * static_cast<float>(c) + 0.5f));
    ASSERT_EQ(run(step).output_ids, std::vector<int32_t>{token}) << "after " << so_far.size() << " tokens";
    ++counts[token];
    so_far.push_back(token);
  }
}

TEST_F(EngineLogitsTest, ProcessedSamplingDoesNotDependOnTheBatch) {
  auto sampled = [&](const std::string& text, uint64_t seed) {
    GenerationRequest r = greedy(prompt(text), 20);
    r.params.temperature = 0.8f;
    r.params.seed = seed;
    r.params.repetition_penalty = 1.3f;
    r.params.frequency_penalty = 0.4f;
    r.params.logit_bias = {{13, -100.0f}};
    return r;
  };
  const GenerationResult alone = run(sampled("Once upon a time", 7));
  auto batched = engine_->generate({sampled("The cat sat", 1), greedy(prompt("Tom"), 12), sampled("Once upon a time", 7)});
  ASSERT_TRUE(batched.is_ok());
  EXPECT_EQ((*batched)[2].output_ids, alone.output_ids);
  EXPECT_EQ(std::count(alone.output_ids.begin(), alone.output_ids.end(), 13), 0);
}

TEST_F(EngineLogitsTest, BannedTokensNeverComeAndForcedOnesAlwaysDo) {
  const GenerationResult plain = run(greedy(prompt("Once upon a time"), 16));
  ASSERT_FALSE(plain.output_ids.empty());
  GenerationRequest banned = greedy(prompt("Once upon a time"), 16);
  banned.params.logit_bias = {{plain.output_ids[0], -100.0f}};
  const GenerationResult b = run(banned);
  EXPECT_EQ(std::count(b.output_ids.begin(), b.output_ids.end(), plain.output_ids[0]), 0);
  GenerationRequest forced = greedy(prompt("Once upon a time"), 6);
  forced.params.temperature = 1.0f;
  forced.params.seed = 3;
  forced.params.logit_bias = {{42, 100.0f}};
  EXPECT_EQ(run(forced).output_ids, std::vector<int32_t>(6, 42));
}

// Forcing EOS while min_tokens bans it leaves no token: those steps fall back to the model's
// own choice, so the sequence is the plain greedy one until min_tokens, then ends on EOS.
TEST_F(EngineLogitsTest, MinTokensHoldsEosBack) {
  const auto eos = engine_->tokenizer()->eos_id();
  ASSERT_TRUE(eos.has_value());
  const GenerationResult plain = run(greedy(prompt("Once upon a time"), 5));
  GenerationRequest r = greedy(prompt("Once upon a time"), 32);
  r.params.logit_bias = {{*eos, 100.0f}};
  r.params.min_tokens = 5;
  const GenerationResult out = run(r);
  ASSERT_EQ(out.output_ids.size(), 6u);
  EXPECT_EQ(std::vector<int32_t>(out.output_ids.begin(), out.output_ids.begin() + 5), plain.output_ids);
  EXPECT_EQ(out.output_ids.back(), *eos);
  EXPECT_EQ(out.finish_reason, FinishReason::kStop);
}

TEST_F(EngineLogitsTest, StopStringsWaitForMinTokens) {
  GenerationRequest r = greedy(prompt("Once upon a time"), 40);
  r.params.stop = {"Lily"};
  const GenerationResult stopped = run(r);
  ASSERT_EQ(stopped.finish_reason, FinishReason::kStop);
  r.params.min_tokens = static_cast<int32_t>(stopped.output_ids.size()) + 1;
  const GenerationResult held = run(r);
  EXPECT_NE(held.text.find("Lily"), std::string::npos) << held.text;
  EXPECT_GT(held.output_ids.size(), stopped.output_ids.size());
}

TEST_F(EngineLogitsTest, ALogitBiasTokenOutsideTheVocabularyIsRefused) {
  GenerationRequest r = greedy(prompt("hi"), 4);
  r.params.logit_bias = {{512, 1.0f}};
  auto added = engine_->add_request(r);
  ASSERT_FALSE(added.is_ok());
  EXPECT_NE(added.status().message().find("logit_bias token id 512"), std::string::npos);
}

}  // namespace
}  // namespace loragate
