// The scheduler's two priority classes: live work is planned first and
// background work (in-server evaluations) gets what it leaves of a step, at
// most max_background_tokens; background sequences give up blocks, seats and
// adapter slots to live ones first and progress alone when nothing else runs.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "model/model_config.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

constexpr RequestPriority kLive = RequestPriority::kLive;
constexpr RequestPriority kBackground = RequestPriority::kBackground;

class SchedulerPriorityTest : public ::testing::Test {
 protected:
  Sequence* make(int64_t id, int prompt_len, RequestPriority priority, int max_tokens = 8,
                 const std::string& adapter = "") {
    SamplingParams params;
    params.max_tokens = max_tokens;
    params.ignore_eos = true;
    auto seq = std::make_unique<Sequence>(id, std::vector<int32_t>(prompt_len, 3), params, -1, 1, 0, nullptr,
                                          Clock::now());
    seq->priority = priority;
    seq->adapter = adapter;
    seqs_.push_back(std::move(seq));
    return seqs_.back().get();
  }

  static std::map<int64_t, int64_t> chunks_of(const std::vector<ScheduledChunk>& planned) {
    std::map<int64_t, int64_t> m;
    for (const ScheduledChunk& c : planned) m[c.seq->id()] = c.num_tokens;
    return m;
  }

  // Runs the planned chunks as the engine does: a chunk that reaches the end samples a token.
  static void run(Scheduler& scheduler, const std::vector<ScheduledChunk>& planned) {
    for (const ScheduledChunk& c : planned) {
      c.seq->advance_computed(c.num_tokens);
      if (c.seq->num_uncomputed() == 0) c.seq->append_token(3, {}, Clock::now());
    }
    scheduler.release_finished();
  }

  std::vector<std::unique_ptr<Sequence>> seqs_;
};

TEST_F(SchedulerPriorityTest, LiveIsPlannedFirstAndBackgroundGetsWhatItLeaves) {
  BlockManager blocks(64, 16);
  Scheduler scheduler(SchedulerOptions{24, 8, 256, 100}, &blocks, nullptr);
  Sequence* background = make(1, 30, kBackground);
  Sequence* live = make(2, 20, kLive);
  scheduler.add(background);  // the background sequence arrived first
  scheduler.add(live);
  EXPECT_TRUE(scheduler.has_live_work());

  std::vector<ScheduledChunk> step = scheduler.schedule();
  ASSERT_EQ(step.size(), 2u);
  EXPECT_EQ(step[0].seq, live) << "live work is planned before background work";
  EXPECT_EQ(chunks_of(step), (std::map<int64_t, int64_t>{{2, 20}, {1, 4}})) << "background fills the rest";
  run(scheduler, step);

  step = scheduler.schedule();
  EXPECT_EQ(chunks_of(step), (std::map<int64_t, int64_t>{{2, 1}, {1, 23}})) << "the live decode, then background";
}

TEST_F(SchedulerPriorityTest, ALiveArrivalGoesBeforeABackgroundPrefillAlreadyRunning) {
  BlockManager blocks(64, 16);
  Scheduler scheduler(SchedulerOptions{16, 8, 256, 16}, &blocks, nullptr);
  Sequence* background = make(1, 64, kBackground);
  scheduler.add(background);
  std::vector<ScheduledChunk> step = scheduler.schedule();
  EXPECT_EQ(chunks_of(step), (std::map<int64_t, int64_t>{{1, 16}}));
  run(scheduler, step);
  EXPECT_FALSE(scheduler.has_live_work());

  scheduler.add(make(2, 12, kLive));
  step = scheduler.schedule();
  EXPECT_EQ(chunks_of(step), (std::map<int64_t, int64_t>{{2, 12}, {1, 4}}));
}

TEST_F(SchedulerPriorityTest, BackgroundTokensPerStepAreCappedAndAloneTheyStillFinish) {
  BlockManager blocks(64, 16);
  Scheduler scheduler(SchedulerOptions{512, 8, 256, 8}, &blocks, nullptr);
  Sequence* first = make(1, 30, kBackground, 3);
  Sequence* second = make(2, 10, kBackground, 3);
  scheduler.add(first);
  scheduler.add(second);
  int steps = 0;
  while (scheduler.has_work() && steps < 100) {
    const std::vector<ScheduledChunk> step = scheduler.schedule();
    ASSERT_FALSE(step.empty()) << "background work alone must progress (step " << steps << ")";
    int64_t tokens = 0;
    for (const ScheduledChunk& c : step) tokens += c.num_tokens;
    EXPECT_LE(tokens, 8) << "step " << steps;
    run(scheduler, step);
    ++steps;
  }
  EXPECT_TRUE(first->finished());
  EXPECT_TRUE(second->finished());
  // 40 prompt tokens at 8 a step, then the decodes: never more steps than
  // that work needs when it is planned one after the other.
  EXPECT_LE(steps, 5 + 2 * 2);
  EXPECT_EQ(blocks.num_used(), 0);
}

TEST_F(SchedulerPriorityTest, RunningBackgroundIsPreemptedBeforeANewerLiveSequence) {
  BlockManager blocks(6, 4);  // three sequences of 8 tokens fill it
  Scheduler scheduler(SchedulerOptions{64, 8, 256, 64}, &blocks, nullptr);
  Sequence* older_live = make(1, 8, kLive);
  Sequence* background = make(2, 8, kBackground);
  Sequence* newer_live = make(3, 8, kLive);
  for (Sequence* s : {older_live, background, newer_live}) scheduler.add(s);
  std::vector<ScheduledChunk> step = scheduler.schedule();
  EXPECT_EQ(chunks_of(step), (std::map<int64_t, int64_t>{{1, 8}, {2, 8}, {3, 8}}));
  EXPECT_EQ(blocks.num_free(), 0);
  run(scheduler, step);

  // Both live decodes need a third block: the background sequence gives its
  // two up, though the newest running sequence is a live one.
  step = scheduler.schedule();
  EXPECT_EQ(chunks_of(step), (std::map<int64_t, int64_t>{{1, 1}, {3, 1}}));
  EXPECT_EQ(background->preemptions, 1);
  EXPECT_EQ(background->num_computed(), 0);
  EXPECT_EQ(newer_live->preemptions, 0);
  EXPECT_EQ(older_live->preemptions, 0);
  EXPECT_EQ(scheduler.num_waiting(), 1u);
  EXPECT_EQ(scheduler.num_running(), 2u);
}

TEST_F(SchedulerPriorityTest, AWaitingLiveSequenceTakesBlocksAndSeatsFromBackground) {
  {
    BlockManager blocks(4, 4);
    Scheduler scheduler(SchedulerOptions{64, 8, 256, 64}, &blocks, nullptr);
    Sequence* background = make(1, 12, kBackground);
    scheduler.add(background);
    run(scheduler, scheduler.schedule());
    EXPECT_EQ(blocks.num_free(), 1);
    scheduler.add(make(2, 8, kLive));
    const std::vector<ScheduledChunk> step = scheduler.schedule();
    EXPECT_EQ(chunks_of(step), (std::map<int64_t, int64_t>{{2, 8}})) << "blocks";
    EXPECT_EQ(background->preemptions, 1);
  }
  {
    BlockManager blocks(64, 16);
    Scheduler scheduler(SchedulerOptions{64, 1, 256, 64}, &blocks, nullptr);  // one seat
    Sequence* background = make(11, 12, kBackground);
    scheduler.add(background);
    run(scheduler, scheduler.schedule());
    scheduler.add(make(12, 8, kLive));
    const std::vector<ScheduledChunk> step = scheduler.schedule();
    EXPECT_EQ(chunks_of(step), (std::map<int64_t, int64_t>{{12, 8}})) << "seats";
    EXPECT_EQ(background->preemptions, 1);
  }
}

TEST_F(SchedulerPriorityTest, NoBackgroundIsPreemptedForNothingNorAdmittedWhileLiveWaitsForBlocks) {
  BlockManager blocks(6, 4);
  Scheduler scheduler(SchedulerOptions{64, 8, 256, 64}, &blocks, nullptr);
  Sequence* live = make(1, 12, kLive);
  Sequence* background = make(2, 4, kBackground);
  scheduler.add(live);
  scheduler.add(background);
  run(scheduler, scheduler.schedule());
  EXPECT_EQ(blocks.num_free(), 2);

  // 20 tokens need 5 blocks: the free ones and the background sequence's are
  // 3 even after the live decode, so preempting it would not let it in.
  Sequence* big_live = make(3, 20, kLive);
  Sequence* late_background = make(4, 4, kBackground);
  scheduler.add(big_live);
  scheduler.add(late_background);
  const std::vector<ScheduledChunk> step = scheduler.schedule();
  EXPECT_EQ(chunks_of(step), (std::map<int64_t, int64_t>{{1, 1}, {2, 1}}));
  EXPECT_EQ(background->preemptions, 0);
  EXPECT_EQ(late_background->num_computed(), 0) << "admitted while a live sequence waits for blocks";
  EXPECT_EQ(scheduler.num_waiting(), 2u);
}

// A live sequence whose adapter needs the only slot, pinned by a background
// sequence, gets it: the background sequence is preempted and waits.
TEST_F(SchedulerPriorityTest, ALiveSequenceTakesTheAdapterSlotOfABackgroundOne) {
  LG_REQUIRE_SHARED("models/stories260K-lora/a/adapter_model.safetensors");
  auto config = ModelConfig::load(testing::shared_dir() + "/models/stories260K");
  ASSERT_TRUE(config.is_ok()) << config.status().to_string();
  AdapterCache adapters(*config, AdapterCacheOptions{1, 16, 1ll << 30});
  for (const char* name : {"a", "b"}) {
    ASSERT_TRUE(adapters.add(name, testing::shared_dir() + "/models/stories260K-lora/" + name).is_ok());
  }
  // Loads both into host memory (one slot: b is evicted from it by a).
  for (const char* name : {"b", "a"}) {
    AdapterCache::AcquireResult got = adapters.acquire(name);
    for (int i = 0; i < 2000 && got.state == AdapterCache::Acquire::kWaitLoad; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      got = adapters.acquire(name);
    }
    ASSERT_EQ(got.state, AdapterCache::Acquire::kReady) << name << ": " << got.error.to_string();
    adapters.release(got.slot);
  }

  BlockManager blocks(64, 16);
  Scheduler scheduler(SchedulerOptions{64, 8, 256, 64}, &blocks, &adapters);
  Sequence* background = make(1, 12, kBackground, 8, "a");
  scheduler.add(background);
  run(scheduler, scheduler.schedule());
  ASSERT_GE(background->lora_slot, 0);

  Sequence* live = make(2, 8, kLive, 8, "b");
  scheduler.add(live);
  const std::vector<ScheduledChunk> step = scheduler.schedule();
  EXPECT_EQ(chunks_of(step), (std::map<int64_t, int64_t>{{2, 8}}));
  EXPECT_GE(live->lora_slot, 0);
  EXPECT_EQ(background->preemptions, 1);
  EXPECT_EQ(background->lora_slot, -1);
  run(scheduler, step);
  while (!live->finished()) run(scheduler, scheduler.schedule());
  // The slot is free again: the background sequence comes back and
  // recomputes its prompt and the token it had sampled.
  const std::vector<ScheduledChunk> after = scheduler.schedule();
  EXPECT_EQ(chunks_of(after), (std::map<int64_t, int64_t>{{1, 13}}));
  EXPECT_GE(background->lora_slot, 0);
}

}  // namespace
}  // namespace loragate
