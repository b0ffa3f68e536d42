// EngineLoop: many threads submit and cancel while the loop steps; every
// request's sink hears each token and exactly one finish.
#include "engine/engine_loop.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "tests/test_util.h"

namespace loragate {
namespace {

class CollectingSink : public RequestSink {
 public:
  void on_token(int64_t, int32_t token, std::string_view delta) override {
    std::lock_guard<std::mutex> lock(mu_);
    tokens_.push_back(token);
    text_ += delta;
  }
  void on_finish(const GenerationResult& result) override {
    std::lock_guard<std::mutex> lock(mu_);
    result_ = result;
    ++finishes_;
    done_.notify_all();
  }
  GenerationResult wait() {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return finishes_ > 0; });
    return result_;
  }
  std::vector<int32_t> tokens() {
    std::lock_guard<std::mutex> lock(mu_);
    return tokens_;
  }
  std::string text() {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }
  int finishes() {
    std::lock_guard<std::mutex> lock(mu_);
    return finishes_;
  }

 private:
  std::mutex mu_;
  std::condition_variable done_;
  std::vector<int32_t> tokens_;
  std::string text_;
  GenerationResult result_;
  int finishes_ = 0;
};

class EngineLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
    EngineOptions o;
    o.max_num_batched_tokens = 32;
    auto e = Engine::load(testing::shared_dir() + "/models/stories260K", o);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    loop_ = std::make_unique<EngineLoop>(std::move(e).value());
  }

  GenerationRequest request(const std::string& prompt, int n, RequestSink* sink) {
    GenerationRequest r;
    r.prompt_ids = loop_->engine().tokenizer()->encode(prompt, true);
    r.params.temperature = 0.0f;
    r.params.max_tokens = n;
    r.sink = sink;
    return r;
  }

  std::unique_ptr<EngineLoop> loop_;
};

TEST_F(EngineLoopTest, ConcurrentSubmittersEachGetTheirOwnAnswer) {
  const std::vector<std::string> prompts = {"Once upon a time", "The cat sat", "Tom had a red ball", "Lily"};
  // Expected answers: each prompt alone.
  std::map<std::string, std::vector<int32_t>> expected;
  for (const std::string& p : prompts) {
    CollectingSink sink;
    ASSERT_TRUE(loop_->submit(request(p, 20, &sink)).is_ok());
    expected[p] = sink.wait().output_ids;
  }
  constexpr int kThreads = 8;
  std::vector<CollectingSink> sinks(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] { ASSERT_TRUE(loop_->submit(request(prompts[i % 4], 20, &sinks[i])).is_ok()); });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    const GenerationResult r = sinks[i].wait();
    EXPECT_EQ(r.output_ids, expected[prompts[i % 4]]) << "client " << i;
    EXPECT_EQ(sinks[i].tokens(), r.output_ids) << "streamed tokens differ from the result";
    EXPECT_EQ(sinks[i].text(), r.text) << "streamed text differs from the result";
    EXPECT_EQ(sinks[i].finishes(), 1);
  }
}

TEST_F(EngineLoopTest, CancelFreesTheBlocksAtOnce) {
  CollectingSink sink;
  auto id = loop_->submit(request("Once upon a time", 400, &sink));
  ASSERT_TRUE(id.is_ok());
  while (sink.tokens().size() < 3) std::this_thread::yield();
  loop_->cancel(*id);
  const GenerationResult r = sink.wait();
  EXPECT_EQ(r.finish_reason, FinishReason::kCancelled);
  EXPECT_LT(r.output_ids.size(), 400u);
  // The stats snapshot is taken after the loop's next pass.
  for (int i = 0; i < 200 && loop_->stats().kv_blocks_used != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(loop_->stats().kv_blocks_used, 0);
}

TEST_F(EngineLoopTest, StreamedTextHoldsBackAPossibleStopString) {
  CollectingSink sink;
  GenerationRequest r = request("Once upon a time", 48, &sink);
  r.params.stop = {"Lily.", "named Lilz"};  // "named Li..." is held back until it is decided
  ASSERT_TRUE(loop_->submit(std::move(r)).is_ok());
  const GenerationResult result = sink.wait();
  EXPECT_EQ(result.finish_reason, FinishReason::kStop);
  EXPECT_EQ(result.text, ", there was a little girl named ");
  EXPECT_EQ(sink.text(), result.text);
}

TEST_F(EngineLoopTest, InvalidRequestIsRefusedSynchronously) {
  CollectingSink sink;
  GenerationRequest r = request("hi", 5, &sink);
  r.params.top_p = 2.0f;
  auto id = loop_->submit(std::move(r));
  ASSERT_FALSE(id.is_ok());
  EXPECT_NE(id.status().message().find("top_p"), std::string::npos);
  EXPECT_EQ(sink.finishes(), 0);
}

TEST_F(EngineLoopTest, DestructionCancelsLiveRequests) {
  CollectingSink sink;
  ASSERT_TRUE(loop_->submit(request("Once upon a time", 450, &sink)).is_ok());
  loop_.reset();
  EXPECT_EQ(sink.finishes(), 1);
}

}  // namespace
}  // namespace loragate
