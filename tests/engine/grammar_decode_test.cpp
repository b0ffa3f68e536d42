// Structured output in the engine, on the real stories260K model: the text is
// a sentence of the request's grammar, the sequence ends when the grammar is
// complete, and grammars mix with free sequences in one batch without
// changing anyone's tokens.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

std::shared_ptr<const grammar::Grammar> gbnf(const char* text) {
  return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(text).value());
}
std::shared_ptr<const grammar::Grammar> animals() { return gbnf("root ::= \"cat\" | \"dog\" | \"a bird\""); }
std::shared_ptr<const grammar::Grammar> number_list() {
  return gbnf("root ::= \"[\" [0-9]{1,3} (\",\" [0-9]{1,3}){0,4} \"]\"");
}

class GrammarDecodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
    auto e = Engine::load(testing::shared_dir() + "/models/stories260K", EngineOptions{});
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    engine_ = std::move(e).value();
  }
  GenerationRequest request(std::shared_ptr<const grammar::Grammar> g, uint64_t seed, float temperature = 1.0f) {
    GenerationRequest r;
    r.prompt_ids = engine_->tokenizer()->encode("Once upon a time", true);
    r.params.temperature = temperature;
    r.params.seed = seed;
    r.params.max_tokens = 40;
    r.params.grammar = std::move(g);
    return r;
  }
  std::unique_ptr<Engine> engine_;
};

TEST_F(GrammarDecodeTest, TheTextIsASentenceOfTheGrammarAndEndsWithIt) {
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    for (const auto& g : {animals(), number_list()}) {
      auto out = engine_->generate({request(g, seed)});
      ASSERT_TRUE(out.is_ok()) << out.status().to_string();
      const GenerationResult& r = out->front();
      EXPECT_TRUE(grammar::grammar_matches(g, r.text)) << "seed " << seed << ": '" << r.text << "'";
      EXPECT_EQ(r.finish_reason, FinishReason::kStop) << r.text;
    }
  }
}

TEST_F(GrammarDecodeTest, ConstrainedAndFreeSequencesShareABatchUnchanged) {
  GenerationRequest free;
  free.prompt_ids = engine_->tokenizer()->encode("The cat sat", true);
  free.params.temperature = 0.8f;
  free.params.seed = 5;
  free.params.max_tokens = 20;
  auto alone_free = engine_->generate({free});
  auto alone_list = engine_->generate({request(number_list(), 3)});
  auto together = engine_->generate({request(animals(), 9), free, request(number_list(), 3)});
  ASSERT_TRUE(alone_free.is_ok() && alone_list.is_ok() && together.is_ok());
  EXPECT_EQ((*together)[1].output_ids, alone_free->front().output_ids);
  EXPECT_EQ((*together)[2].output_ids, alone_list->front().output_ids);
}

TEST_F(GrammarDecodeTest, MaxTokensCutsAnUnfinishedSentenceAsLength) {
  GenerationRequest r = request(number_list(), 2);
  r.params.max_tokens = 2;
  auto out = engine_->generate({r});
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(out->front().finish_reason, FinishReason::kLength);
  grammar::Matcher m(number_list());
  EXPECT_TRUE(m.advance(out->front().text)) << "a prefix of a sentence: '" << out->front().text << "'";
}

}  // namespace
}  // namespace loragate
