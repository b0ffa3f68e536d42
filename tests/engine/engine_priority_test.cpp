// Background requests (in-server evaluations) on the real stories260K model:
// the priority class changes when a sequence runs, never what it produces;
// live sequences are never preempted while background ones hold blocks; an
// EngineLoop whose work is all background steps in the gate's background
// class, and in its live class as soon as a live request is there.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "engine/engine.h"
#include "engine/engine_loop.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

class EnginePriorityTest : public ::testing::Test {
 protected:
  void SetUp() override { LG_REQUIRE_SHARED("models/stories260K/model.safetensors"); }

  static std::unique_ptr<Engine> load(EngineOptions options) {
    options.max_loras = 0;
    auto e = Engine::load(testing::shared_dir() + "/models/stories260K", options);
    EXPECT_TRUE(e.is_ok()) << e.status().to_string();
    return e.is_ok() ? std::move(e).value() : nullptr;
  }

  static GenerationRequest greedy(const Engine& engine, const std::string& prompt, int max_tokens,
                                  RequestPriority priority) {
    GenerationRequest r;
    r.prompt_ids = engine.tokenizer()->encode(prompt, true);
    r.params.temperature = 0.0f;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    r.priority = priority;
    return r;
  }

  // Greedy outputs of `prompts` (with their lengths), every request of the given classes.
  static std::vector<GenerationResult> run(Engine& engine, const std::vector<std::pair<std::string, int>>& prompts,
                                           const std::vector<RequestPriority>& classes) {
    std::vector<GenerationRequest> requests;
    for (size_t i = 0; i < prompts.size(); ++i) {
      requests.push_back(greedy(engine, prompts[i].first, prompts[i].second, classes[i]));
    }
    auto out = engine.generate(std::move(requests));
    EXPECT_TRUE(out.is_ok()) << out.status().to_string();
    return out.is_ok() ? std::move(out).value() : std::vector<GenerationResult>{};
  }
};

const std::vector<std::pair<std::string, int>> kPrompts = {
    {"Once upon a time", 24},
    {"Tom and Sue went to the big park to play with their ball and a red kite", 64},
    {"The cat sat", 24},
    {"Lily had a little dog named Max. One day, Max ran into the woods and", 64},
    {"The sun was hot", 64},
};

TEST_F(EnginePriorityTest, BackgroundRequestsGiveTheSameGreedyOutputsAsLiveOnes) {
  EngineOptions options;
  options.max_num_batched_tokens = 16;
  options.max_background_tokens = 4;  // background prompts take many small chunks
  auto reference_engine = load(options), engine = load(options);
  ASSERT_TRUE(reference_engine && engine);
  const std::vector<RequestPriority> all_live(kPrompts.size(), RequestPriority::kLive);
  const std::vector<GenerationResult> reference = run(*reference_engine, kPrompts, all_live);
  const std::vector<RequestPriority> mixed = {RequestPriority::kBackground, RequestPriority::kLive,
                                              RequestPriority::kBackground, RequestPriority::kBackground,
                                              RequestPriority::kLive};
  const std::vector<GenerationResult> got = run(*engine, kPrompts, mixed);
  ASSERT_EQ(got.size(), reference.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].finish_reason, FinishReason::kLength) << i;
    EXPECT_EQ(got[i].output_ids.size(), static_cast<size_t>(kPrompts[i].second)) << i;
    EXPECT_EQ(got[i].output_ids, reference[i].output_ids) << "request " << i;
  }
  // Chunked at 4 tokens a step, the background prompts took more steps than
  // the same work all live: the cap was in force.
  EXPECT_GT(engine->stats().steps, reference_engine->stats().steps);
}

TEST_F(EnginePriorityTest, UnderATightKvPoolBackgroundIsPreemptedAndLiveNever) {
  EngineOptions options;
  options.kv_block_size = 4;
  options.kv_num_blocks = 40;  // the live requests need 8 blocks each; the three background ones 20 each
  options.max_num_batched_tokens = 32;
  auto engine = load(options);
  ASSERT_TRUE(engine);
  const std::vector<std::pair<std::string, int>> prompts = {
      {"Once upon a time", 24}, {"Tom and Sue went to the park", 64},   {"The cat sat", 24},
      {"Lily had a dog named Max", 64}, {"The sun was hot and the sky", 64}};
  const std::vector<RequestPriority> classes = {RequestPriority::kLive, RequestPriority::kBackground,
                                                RequestPriority::kLive, RequestPriority::kBackground,
                                                RequestPriority::kBackground};
  EngineOptions roomy = options;
  roomy.kv_num_blocks = 0;  // the default pool: nothing preempted
  auto roomy_engine = load(roomy);
  ASSERT_TRUE(roomy_engine);
  const std::vector<GenerationResult> reference = run(*roomy_engine, prompts, classes);
  const std::vector<GenerationResult> got = run(*engine, prompts, classes);
  ASSERT_EQ(got.size(), prompts.size());
  int32_t background_preemptions = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].output_ids, reference[i].output_ids) << "request " << i;
    if (classes[i] == RequestPriority::kLive) {
      EXPECT_EQ(got[i].preemptions, 0) << "live request " << i << " was preempted while background ones held blocks";
    } else {
      background_preemptions += got[i].preemptions;
    }
  }
  EXPECT_GT(background_preemptions, 0) << "the pool was meant to be too small for every background request at once";
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
}

// Records, for each token, the gate class holding the turn while it was emitted.
class ClassRecordingSink : public RequestSink {
 public:
  explicit ClassRecordingSink(const ComputeGate& gate) : gate_(gate) {}
  void on_token(int64_t, int32_t, std::string_view) override {
    const ComputeGateStats s = gate_.stats();
    std::lock_guard<std::mutex> lock(mu_);
    classes_.push_back(s.held ? s.held_by : static_cast<GateClass>(-1));
  }
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
  std::vector<GateClass> classes() {
    std::lock_guard<std::mutex> lock(mu_);
    return classes_;
  }

 private:
  const ComputeGate& gate_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<GateClass> classes_;
  GenerationResult result_;
  bool done_ = false;
};

TEST_F(EnginePriorityTest, ALoopWithOnlyBackgroundWorkStepsInTheBackgroundClass) {
  auto gate = std::make_shared<ComputeGate>(0.25);
  EngineOptions options;
  options.max_num_batched_tokens = 32;
  auto engine = load(options);
  ASSERT_TRUE(engine);
  ClassRecordingSink background_sink(*gate), live_sink(*gate);  // outlive the loop
  {
    EngineLoop loop(std::move(engine), gate, /*serving=*/true);
    GenerationRequest background = greedy(loop.engine(), "Once upon a time", 48, RequestPriority::kBackground);
    background.sink = &background_sink;
    ASSERT_TRUE(loop.submit(std::move(background)).is_ok());
    EXPECT_EQ(background_sink.wait().output_ids.size(), 48u);
    const ComputeGateStats alone = gate->stats();
    EXPECT_GT(alone.background_turns, 0);
    EXPECT_EQ(alone.serving_turns, 0) << "no live work: the loop never queued as serving";

    GenerationRequest live = greedy(loop.engine(), "The cat sat", 16, RequestPriority::kLive);
    live.sink = &live_sink;
    ASSERT_TRUE(loop.submit(std::move(live)).is_ok());
    EXPECT_EQ(live_sink.wait().output_ids.size(), 16u);
    EXPECT_GT(gate->stats().serving_turns, 0);
  }
  for (GateClass c : background_sink.classes()) EXPECT_EQ(c, GateClass::kBackground);
  for (GateClass c : live_sink.classes()) EXPECT_EQ(c, GateClass::kServing);
}

}  // namespace
}  // namespace loragate
