// Engine behaviour on the real stories260K model: seeded sampling is
// batch-independent, bad requests are refused with a clear error, stop
// strings and max_tokens end sequences; a tokenizer of another model is refused.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "tests/test_util.h"

namespace loragate {
namespace {

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
    EngineOptions options;
    options.max_num_batched_tokens = 24;
    auto e = Engine::load(testing::shared_dir() + "/models/stories260K", options);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    engine_ = std::move(e).value();
  }

  GenerationRequest sampled(const std::string& prompt, uint64_t seed, int n = 24) {
    GenerationRequest r;
    r.prompt_ids = engine_->tokenizer()->encode(prompt, true);
    r.params.temperature = 0.9f;
    r.params.top_k = 40;
    r.params.top_p = 0.95f;
    r.params.seed = seed;
    r.params.max_tokens = n;
    return r;
  }

  std::unique_ptr<Engine> engine_;
};

TEST_F(EngineTest, SeededSamplingDoesNotDependOnTheBatch) {
  auto alone = engine_->generate({sampled("Once upon a time", 1234)});
  ASSERT_TRUE(alone.is_ok());
  auto batched = engine_->generate({sampled("The cat sat", 1), sampled("Once upon a time", 1234),
                                    sampled("Tom and Sue went to the big park to play", 99)});
  ASSERT_TRUE(batched.is_ok());
  EXPECT_EQ(alone->front().output_ids, (*batched)[1].output_ids);
  auto other_seed = engine_->generate({sampled("Once upon a time", 4321)});
  EXPECT_NE(alone->front().output_ids, other_seed->front().output_ids);
}

TEST_F(EngineTest, RefusesBadRequestsWithTheReason) {
  GenerationRequest empty;
  EXPECT_NE(engine_->add_request(empty).status().message().find("empty"), std::string::npos);

  GenerationRequest bad_id = sampled("hi", 1);
  bad_id.prompt_ids.push_back(512);
  auto r = engine_->add_request(bad_id);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("512"), std::string::npos);

  GenerationRequest too_long = sampled("hi", 1, 600);
  EXPECT_NE(engine_->add_request(too_long).status().message().find("exceeds the model length"), std::string::npos);

  GenerationRequest bad_temp = sampled("hi", 1);
  bad_temp.params.temperature = -0.5f;
  EXPECT_NE(engine_->add_request(bad_temp).status().message().find("temperature"), std::string::npos);
  EXPECT_FALSE(engine_->has_unfinished()) << "refused requests must not be queued";
}

TEST_F(EngineTest, GenerateIsAllOrNothingWhenALaterRequestIsRefused) {
  GenerationRequest bad = sampled("hi", 1);
  bad.prompt_ids.push_back(512);  // outside the vocabulary
  auto r = engine_->generate({sampled("Once upon a time", 1), sampled("The cat", 2), bad});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("request 2"), std::string::npos) << r.status().message();
  // The two accepted before it were left queued (and ran on with the next step).
  EXPECT_FALSE(engine_->has_unfinished());
  EXPECT_EQ(engine_->stats().kv_blocks_used, 0);
  EXPECT_TRUE(engine_->take_finished().empty());
  auto next = engine_->generate({sampled("Once upon a time", 1)});
  ASSERT_TRUE(next.is_ok());
  EXPECT_EQ(next->size(), 1u);
}

TEST_F(EngineTest, StopStringEndsTheTextBeforeIt) {
  GenerationRequest r;
  r.prompt_ids = engine_->tokenizer()->encode("Once upon a time", true);
  r.params.temperature = 0.0f;
  r.params.max_tokens = 48;
  r.params.stop = {"Lily"};
  auto out = engine_->generate({r});
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(out->front().finish_reason, FinishReason::kStop);
  EXPECT_EQ(out->front().text, ", there was a little girl named ");
  EXPECT_LT(out->front().output_ids.size(), 48u);
}

TEST_F(EngineTest, MaxTokensAndTimingsAreRecorded) {
  GenerationRequest r = sampled("Once upon a time", 5, 7);
  auto out = engine_->generate({r});
  ASSERT_TRUE(out.is_ok());
  const GenerationResult& g = out->front();
  EXPECT_EQ(g.output_ids.size(), 7u);
  EXPECT_EQ(g.finish_reason, FinishReason::kLength);
  EXPECT_EQ(g.itl_ms.size(), 6u);
  EXPECT_GE(g.ttft_ms, g.queue_ms);
}

// The stories260K weights (vocab_size 512) beside a tokenizer from elsewhere.
class MismatchedTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
    LG_REQUIRE_SHARED("tokenizers/mistral7b/tokenizer.json");
    dir_ = testing::make_temp_dir("lg-mismatch");
    const std::string model = testing::shared_dir() + "/models/stories260K";
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}) {
      std::filesystem::copy_file(model + "/" + f, dir_ + "/" + f);
    }
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void set_vocab_size(int n) {
    std::ifstream in(dir_ + "/config.json");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(dir_ + "/config.json", std::ios::trunc)
        << std::regex_replace(text, std::regex("\"vocab_size\": *[0-9]+"), "\"vocab_size\": " + std::to_string(n));
  }

  std::string dir_;
};

TEST_F(MismatchedTokenizerTest, AnotherModelsTokenizerIsRefusedNamingBothSizes) {
  ASSERT_TRUE(Engine::load(dir_, EngineOptions{}).is_ok()) << "the model's own tokenizer fits";
  std::filesystem::copy_file(testing::shared_dir() + "/tokenizers/mistral7b/tokenizer.json", dir_ + "/tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(testing::shared_dir() + "/tokenizers/mistral7b/tokenizer_config.json",
                             dir_ + "/tokenizer_config.json", std::filesystem::copy_options::overwrite_existing);
  auto e = Engine::load(dir_, EngineOptions{});
  ASSERT_FALSE(e.is_ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("32000 tokens"), std::string::npos) << e.status().to_string();
  EXPECT_NE(e.status().message().find("vocab_size in config.json is 512"), std::string::npos) << e.status().to_string();
}

TEST_F(MismatchedTokenizerTest, AModelVocabularySmallerThanItsTokenizerIsRefused) {
  set_vocab_size(500);  // the tokenizer's ids (and its special tokens) reach 511
  auto e = Engine::load(dir_, EngineOptions{});
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("512 tokens"), std::string::npos) << e.status().to_string();
  EXPECT_NE(e.status().message().find("is 500"), std::string::npos) << e.status().to_string();
}

}  // namespace
}  // namespace loragate
