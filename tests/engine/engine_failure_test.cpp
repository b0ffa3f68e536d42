// A failed step (the runner's forward pass errs) ends every request it
// touches with an internal error carrying the runner's status, never leaves
// requests queued behind generate(), and makes an EngineLoop unhealthy.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "engine/engine.h"
#include "engine/engine_loop.h"
#include "tests/engine/failing_runner.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

using testing::RunnerFaults;

class EngineFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
    faults_ = std::make_shared<RunnerFaults>();
    EngineOptions o;
    o.max_num_batched_tokens = 8;  // several steps per prompt
    o.runner_factory = testing::failing_runner_factory(faults_);
    auto e = Engine::load(testing::shared_dir() + "/models/stories260K", o);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    engine_ = std::move(e).value();
  }

  GenerationRequest greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
    GenerationRequest r;
    r.prompt_ids = std::move(prompt);
    r.params.temperature = 0;
    r.params.max_tokens = max_tokens;
    return r;
  }

  std::shared_ptr<RunnerFaults> faults_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(EngineFailureTest, GenerateReturnsOnlyWhenEveryRequestItSubmittedHasEnded) {
  faults_->forwards_before_failing = 2;
  auto r = engine_->generate({greedy({1, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100}, 20), greedy({1, 5}, 20),
                              greedy({1, 7, 9}, 20)});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("injected"), std::string::npos) << r.status().to_string();
  EXPECT_FALSE(engine_->has_unfinished()) << "requests left queued would run on behind the caller";
  EXPECT_EQ(engine_->stats().kv_blocks_used, 0);
  EXPECT_TRUE(engine_->take_finished().empty());
}

TEST_F(EngineFailureTest, AFailedStepEndsEveryLiveRequestWithAnInternalErrorCarryingItsStatus) {
  ASSERT_TRUE(engine_->add_request(greedy({1, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100}, 20)).is_ok());
  ASSERT_TRUE(engine_->add_request(greedy({1, 5}, 20)).is_ok());
  ASSERT_TRUE(engine_->step().is_ok());
  EXPECT_TRUE(engine_->health().is_ok());
  faults_->forwards_before_failing = 0;
  Status s = engine_->step();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(engine_->health().code(), StatusCode::kInternal) << "the engine records that it is unhealthy";
  EXPECT_FALSE(engine_->has_unfinished());
  EXPECT_EQ(engine_->stats().kv_blocks_used, 0);
  std::vector<GenerationResult> done = engine_->take_finished();
  ASSERT_EQ(done.size(), 2u);
  for (const GenerationResult& r : done) {
    EXPECT_EQ(r.finish_reason, FinishReason::kError);
    EXPECT_EQ(r.error_code, StatusCode::kInternal);
    EXPECT_NE(r.error.find("illegal memory access"), std::string::npos) << r.error;
  }
}

class WaitingSink : public RequestSink {
 public:
  void on_token(int64_t, int32_t, std::string_view) override {}
  void on_finish(const GenerationResult& result) override {
    std::lock_guard<std::mutex> lock(mu_);
    result_ = result;
    done_ = true;
    cv_.notify_all();
  }
  GenerationResult wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return result_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  GenerationResult result_;
};

TEST_F(EngineFailureTest, ALoopWhoseStepFailedEndsRequestsWithTheErrorAndTurnsUnhealthy) {
  faults_->forwards_before_failing = 0;  // sticky: every step fails
  EngineLoop loop(std::move(engine_));
  EXPECT_TRUE(loop.health().is_ok());
  for (int i = 0; i < 2; ++i) {  // the first request meets the failure, the second a loop already unhealthy
    WaitingSink sink;
    GenerationRequest r = greedy({1, 10, 20}, 8);
    r.sink = &sink;
    ASSERT_TRUE(loop.submit(std::move(r)).is_ok());
    const GenerationResult result = sink.wait();
    EXPECT_EQ(result.finish_reason, FinishReason::kError) << "not a cancel (a shutdown): an engine error";
    EXPECT_EQ(result.error_code, StatusCode::kInternal);
    EXPECT_NE(result.error.find("illegal memory access"), std::string::npos) << result.error;
    const Status health = loop.health();  // recorded before the sink heard of the failure
    EXPECT_EQ(health.code(), StatusCode::kInternal);
    EXPECT_NE(health.message().find("illegal memory access"), std::string::npos) << health.to_string();
  }
}

}  // namespace
}  // namespace loragate
