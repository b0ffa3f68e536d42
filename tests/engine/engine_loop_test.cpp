// EngineLoop: many threads submit and cancel while the loop steps; every
// request's sink hears each token and exactly one finish.
#include "engine/engine_loop.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

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

// Holds the step thread inside on_token until released.
class BlockingSink : public CollectingSink {
 public:
  void on_token(int64_t id, int32_t token, std::string_view delta) override {
    std::unique_lock<std::mutex> lock(mu_);
    entered_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return released_; });
    lock.unlock();
    CollectingSink::on_token(id, token, delta);
  }
  void wait_entered() {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return entered_; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool entered_ = false, released_ = false;
};

TEST_F(EngineLoopTest, AnAdapterRemovedBeforeAdmissionEndsTheRequestAsNotFound) {
  AdapterCache& cache = *loop_->engine().adapters();
  ASSERT_TRUE(cache.add("x", testing::shared_dir() + "/models/stories260K-lora/a").is_ok());
  BlockingSink blocker;
  ASSERT_TRUE(loop_->submit(request("Once upon a time", 2, &blocker)).is_ok());
  blocker.wait_entered();  // the step thread is busy: what is submitted now waits in the inbox
  CollectingSink sink;
  GenerationRequest r = request("Once upon a time", 2, &sink);
  r.adapter = "x";
  ASSERT_TRUE(loop_->submit(std::move(r)).is_ok()) << "valid when submitted";
  ASSERT_TRUE(cache.remove("x").is_ok());
  blocker.release();
  const GenerationResult result = sink.wait();
  EXPECT_EQ(result.finish_reason, FinishReason::kError) << "not kCancelled, which reads as a shutdown";
  EXPECT_EQ(result.error_code, StatusCode::kNotFound);
  EXPECT_NE(result.error.find("'x'"), std::string::npos) << result.error;
  blocker.wait();
}

TEST_F(EngineLoopTest, AnIdleLoopFreesARemovedAdapterSoItsNameCanBeReused) {
  AdapterCache& cache = *loop_->engine().adapters();
  const std::string a = testing::shared_dir() + "/models/stories260K-lora/a";
  ASSERT_TRUE(cache.add("x", a).is_ok());
  CollectingSink sink;
  GenerationRequest r = request("Once upon a time", 2, &sink);
  r.adapter = "x";
  ASSERT_TRUE(loop_->submit(std::move(r)).is_ok());
  sink.wait();
  ASSERT_TRUE(cache.remove("x").is_ok());
  // No generation runs after the removal: only the idle loop's housekeeping frees it.
  Status again;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    again = cache.add("x", a);
  } while (!again.is_ok() && std::chrono::steady_clock::now() < deadline);
  EXPECT_TRUE(again.is_ok()) << again.to_string();
  EXPECT_EQ(cache.stats().slots_used, 0) << "the removed adapter's slot was freed";
}

// CPU ticks (user + system) the thread named `comm` of this process has used; -1 if none.
long thread_cpu_ticks(const std::string& comm) {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream name(task.path() / "comm");
    std::string n;
    std::getline(name, n);
    if (n != comm) continue;
    std::ifstream stat(task.path() / "stat");
    std::string line;
    std::getline(stat, line);
    std::istringstream rest(line.substr(line.rfind(')') + 2));  // fields after "(comm)"
    std::string field;
    long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) utime = std::stol(field);
      if (i == 15) stime = std::stol(field);
    }
    return utime + stime;
  }
  return -1;
}

// An adapter whose weights take long to load: a valid header and 256 MiB of
// (sparse) data that the loader hashes before it finds the tensor is not a LoRA
// weight. The load then fails.
std::string slow_adapter(const std::string& dir) {
  std::filesystem::copy(testing::shared_dir() + "/models/stories260K-lora/a/adapter_config.json", dir);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  const uint64_t data = 32ull << 20;  // hashing is ~10x slower under a sanitizer: still a slow load
#else
  const uint64_t data = 256ull << 20;
#endif
  std::string header = R"({"slow":{"dtype":"F32","shape":[)" + std::to_string(data / 4) +
                       R"(],"data_offsets":[0,)" + std::to_string(data) + "]}}";
  header.resize((header.size() + 7) / 8 * 8, ' ');
  std::ofstream out(dir + "/adapter_model.safetensors", std::ios::binary);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header;
  out.close();
  std::filesystem::resize_file(dir + "/adapter_model.safetensors", 8 + n + data);
  return dir;
}

// While every request waits on an adapter load, the step thread must sleep,
// not spin: it used to take a whole core until the load ended.
TEST_F(EngineLoopTest, TheStepThreadSleepsWhileEveryRequestWaitsOnAnAdapterLoad) {
  const std::string dir = testing::make_temp_dir("lg-slow-adapter");
  AdapterCache& cache = *loop_->engine().adapters();
  ASSERT_TRUE(cache.add("slow", slow_adapter(dir)).is_ok());
  CollectingSink sink;
  GenerationRequest r = request("Once upon a time", 2, &sink);
  r.adapter = "slow";
  ASSERT_TRUE(loop_->submit(std::move(r)).is_ok());
  auto loading = [&] { return cache.list()[0].tier == AdapterTier::kLoading; };
  for (int i = 0; i < 200 && !loading(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(loading());
  const long before = thread_cpu_ticks("lg-step");
  ASSERT_GE(before, 0) << "the step thread is named lg-step";
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const long used = thread_cpu_ticks("lg-step") - before;
  const bool still_loading = loading();
  const GenerationResult result = sink.wait();
  std::filesystem::remove_all(dir);
  if (!still_loading) GTEST_SKIP() << "the load ended within the window; nothing measured";
  const long window = sysconf(_SC_CLK_TCK) * 400 / 1000;
  EXPECT_LE(used, window / 8) << "step thread: " << used << " CPU ticks in a window of " << window;
  EXPECT_EQ(result.finish_reason, FinishReason::kError) << "the slow adapter does not load in the end";
}

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

// ---------------------------------------------------------------------------
// Two loops (a serving and a candidate base) sharing the cores through a ComputeGate.

// Checks at every token (emitted inside a step) that the gate's turn is held
// by the class of the sink's loop: steps of the two loops never overlap.
// Also appends the loop's tag to a log shared by the sinks of both loops.
class GateCheckingSink : public CollectingSink {
 public:
  struct Log {
    std::mutex mu;
    std::string tags;  // one char per token, in emission order
    std::atomic<int64_t> violations{0};
  };
  GateCheckingSink(const ComputeGate& gate, bool serving, char tag, Log& log)
      : gate_(gate), serving_(serving), tag_(tag), log_(log) {}
  void on_token(int64_t id, int32_t token, std::string_view delta) override {
    const ComputeGateStats s = gate_.stats();
    if (!s.held || s.held_by_serving != serving_) log_.violations.fetch_add(1);
    {
      std::lock_guard<std::mutex> lock(log_.mu);
      log_.tags += tag_;
    }
    CollectingSink::on_token(id, token, delta);
  }

 private:
  const ComputeGate& gate_;
  const bool serving_;
  const char tag_;
  Log& log_;
};

class EngineLoopGateTest : public ::testing::Test {
 protected:
  void SetUp() override { LG_REQUIRE_SHARED("models/stories260K/model.safetensors"); }

  static std::unique_ptr<Engine> load() {
    EngineOptions o;
    o.max_num_batched_tokens = 32;
    o.max_loras = 0;
    auto e = Engine::load(testing::shared_dir() + "/models/stories260K", o);
    EXPECT_TRUE(e.is_ok()) << e.status().to_string();
    return e.is_ok() ? std::move(e).value() : nullptr;
  }

  static GenerationRequest request(const EngineLoop& loop, int n, RequestSink* sink) {
    GenerationRequest r;
    r.prompt_ids = loop.engine().tokenizer()->encode("Once upon a time", true);
    r.params.temperature = 0.0f;
    r.params.max_tokens = n;
    r.params.ignore_eos = true;
    r.sink = sink;
    return r;
  }

  // Polls `pred` for up to 60 s.
  template <typename Pred>
  static bool eventually(Pred pred) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!pred()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return true;
  }

  static double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }
};

TEST_F(EngineLoopGateTest, CandidateGetsItsShareWhileServingIsBusyAndAllWhenIdle) {
  auto gate = std::make_shared<ComputeGate>(0.25);
  auto serving_engine = load(), candidate_engine = load();
  ASSERT_TRUE(serving_engine && candidate_engine);
  // Sinks outlive the loops (which call them until destroyed).
  GateCheckingSink::Log log;
  std::deque<GateCheckingSink> serving_sinks, candidate_sinks;
  EngineLoop serving(std::move(serving_engine), gate, true);
  EngineLoop candidate(std::move(candidate_engine), gate, false);
  EXPECT_TRUE(serving.serving());
  EXPECT_FALSE(candidate.serving());

  // Serving needs 3 windows of 80 turns after phase 1 is seen to start; on a
  // loaded machine the test thread may see that late, so serving's work runs
  // to nearly the context limit (512) to leave a margin of ~250 turns.
  constexpr int kSeqs = 4, kServingTokens = 500, kCandidateTokens = 480;
  for (int i = 0; i < kSeqs; ++i) {
    candidate_sinks.emplace_back(*gate, false, 'c', log);
    ASSERT_TRUE(candidate.submit(request(candidate, kCandidateTokens, &candidate_sinks.back())).is_ok());
  }
  for (int i = 0; i < kSeqs; ++i) {
    serving_sinks.emplace_back(*gate, true, 's', log);
    ASSERT_TRUE(serving.submit(request(serving, kServingTokens, &serving_sinks.back())).is_ok());
  }

  // Phase 1: both loops running all their requests.
  ASSERT_TRUE(eventually([&] { return serving.stats().running == kSeqs && candidate.stats().running == kSeqs; }));
  const ComputeGateStats a = gate->stats();
  const auto ta = std::chrono::steady_clock::now();
  // The share over three windows of 80 serving turns; their median is judged,
  // so one window disturbed by another process on a shared machine cannot
  // fail the test alone.
  std::vector<double> shares;
  ComputeGateStats from = a;
  for (int w = 0; w < 3; ++w) {
    ASSERT_TRUE(eventually([&] { return gate->stats().serving_turns >= from.serving_turns + 80; }));
    const ComputeGateStats to = gate->stats();
    // The share is of contested compute time (steps differ in length: context grows).
    const double candidate_ns = double(to.contested_candidate_ns - from.contested_candidate_ns);
    shares.push_back(candidate_ns / (candidate_ns + double(to.contested_serving_ns - from.contested_serving_ns)));
    from = to;
  }
  const ComputeGateStats b = from;
  const double t_ab = seconds_since(ta);
  EXPECT_EQ(serving.stats().running, size_t{kSeqs}) << "serving ran out of work during phase 1";
  const int64_t grants_ab = (b.serving_turns + b.candidate_turns) - (a.serving_turns + a.candidate_turns);
  const int64_t candidate_ab = b.candidate_turns - a.candidate_turns;
  EXPECT_GE(b.contested_grants - a.contested_grants, grants_ab - 1) << "both loops had work: every grant contested";
  // The policy balances contested time since the gate began, and a step
  // descheduled on a loaded machine counts as held: the gate then makes up
  // for it over the next turns, so a window's share can swing far from 0.25
  // (a CI run saw 0, 0.04 and 0.41). What it keeps is the cumulative share,
  // off by at most about one step's time.
  const double contested_ns = double(b.contested_candidate_ns + b.contested_serving_ns);
  const double cumulative = double(b.contested_candidate_ns) / contested_ns;
  EXPECT_NEAR(cumulative, 0.25, 0.08) << "window shares " << shares[0] << ", " << shares[1] << ", " << shares[2]
                                      << "; " << candidate_ab << " of " << grants_ab << " turns";
  EXPECT_GT(candidate_ab, 0) << "the candidate got no turn while both loops were busy";

  // Phase 2: serving has finished; the candidate gets every turn.
  for (auto& sink : serving_sinks) EXPECT_EQ(sink.wait().output_ids.size(), size_t{kServingTokens});
  ASSERT_TRUE(eventually([&] { return serving.stats().running == 0; }));
  const ComputeGateStats c = gate->stats();
  const auto tc = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return gate->stats().candidate_turns >= c.candidate_turns + 100; }));
  const ComputeGateStats d = gate->stats();
  const double t_cd = seconds_since(tc);
  EXPECT_EQ(candidate.stats().running, size_t{kSeqs}) << "the candidate ran out of work during phase 2";
  EXPECT_EQ(d.serving_turns, c.serving_turns);
  EXPECT_EQ(d.contested_grants, c.contested_grants);
  // Full rate: alone, the candidate holds the cores nearly all the time and
  // hardly waits (step rates are not compared: a step's cost grows with the
  // context, which is longer in phase 2).
  const double held_cd = double(d.candidate_held_ns - c.candidate_held_ns) * 1e-9 / t_cd;
  const double wait_cd = double(d.candidate_wait_ns - c.candidate_wait_ns) * 1e-9 / t_cd;
  EXPECT_GT(held_cd, 0.8) << "the candidate held the gate for " << held_cd << " of phase 2";
  EXPECT_LT(wait_cd, 0.1) << "the candidate waited for " << wait_cd << " of phase 2";
  // While both were busy the candidate waited most of the time, and the gate was never left idle.
  const double wait_ab = double(b.candidate_wait_ns - a.candidate_wait_ns) * 1e-9 / t_ab;
  const double held_ab =
      double((b.serving_held_ns + b.candidate_held_ns) - (a.serving_held_ns + a.candidate_held_ns)) * 1e-9 / t_ab;
  EXPECT_GT(wait_ab, 0.5) << "the candidate waited for " << wait_ab << " of phase 1";
  EXPECT_GT(held_ab, 0.8) << "the gate was held for " << held_ab << " of phase 1";
  for (auto& sink : candidate_sinks) EXPECT_EQ(sink.wait().output_ids.size(), size_t{kCandidateTokens});
  ASSERT_TRUE(eventually([&] { return candidate.stats().running == 0; }));
  // Every step ran inside one turn of its loop's class, and every turn ran one step.
  const ComputeGateStats end = gate->stats();
  EXPECT_EQ(serving.stats().steps, end.serving_turns);
  EXPECT_EQ(candidate.stats().steps, end.candidate_turns);
  EXPECT_EQ(log.violations.load(), 0) << "a token was emitted while the other class held the turn";
  EXPECT_FALSE(end.held);
}

TEST_F(EngineLoopGateTest, StarvedCandidateStillCancelsAndTakesOverWhenPromoted) {
  auto gate = std::make_shared<ComputeGate>(0.0);  // the candidate runs only when serving idles
  auto serving_engine = load(), candidate_engine = load();
  ASSERT_TRUE(serving_engine && candidate_engine);
  // Sinks outlive the loops (which call them until destroyed).
  GateCheckingSink::Log log;
  std::deque<GateCheckingSink> serving_sinks;
  GateCheckingSink starved(*gate, false, 'x', log), promoted(*gate, true, 'p', log), second(*gate, true, 'q', log);
  EngineLoop serving(std::move(serving_engine), gate, true);
  EngineLoop candidate(std::move(candidate_engine), gate, false);

  for (int i = 0; i < 2; ++i) {
    serving_sinks.emplace_back(*gate, true, 's', log);
    ASSERT_TRUE(serving.submit(request(serving, 480, &serving_sinks.back())).is_ok());
  }
  ASSERT_TRUE(eventually([&] { return serving.stats().running == 2 && serving.stats().steps >= 5; }));

  // Queued behind a busy serving loop with share 0, the request never runs, but cancelling it ends it now.
  auto id = candidate.submit(request(candidate, 100, &starved));
  ASSERT_TRUE(id.is_ok());
  ASSERT_TRUE(eventually([&] { return gate->stats().candidate_queued == 1; }));
  candidate.cancel(*id);
  const GenerationResult cancelled = starved.wait();
  EXPECT_EQ(cancelled.finish_reason, FinishReason::kCancelled);
  EXPECT_TRUE(cancelled.output_ids.empty());
  EXPECT_EQ(serving.stats().running, 2u) << "serving should still be busy";
  ASSERT_TRUE(eventually([&] { return gate->stats().candidate_queued == 0; }));
  EXPECT_EQ(candidate.stats().steps, 0);

  // Promoted while it waits, the candidate's queued turn moves to the serving
  // class: it now shares turns with the other serving loop and finishes.
  ASSERT_TRUE(candidate.submit(request(candidate, 40, &promoted)).is_ok());
  ASSERT_TRUE(eventually([&] { return gate->stats().candidate_queued == 1; }));
  candidate.set_serving(true);
  EXPECT_TRUE(candidate.serving());
  EXPECT_EQ(promoted.wait().output_ids.size(), 40u);
  EXPECT_EQ(serving_sinks[0].finishes(), 0) << "the other loop should still have work";

  // Demoted to candidate (share 0), the other loop waits whenever the promoted one has work:
  // the promoted loop's tokens come in one unbroken run.
  serving.set_serving(false);
  EXPECT_FALSE(serving.serving());
  size_t before;
  {
    std::lock_guard<std::mutex> lock(log.mu);
    before = log.tags.size();
  }
  ASSERT_TRUE(candidate.submit(request(candidate, 40, &second)).is_ok());
  EXPECT_EQ(second.wait().output_ids.size(), 40u);
  EXPECT_EQ(serving_sinks[0].finishes(), 0) << "the demoted loop should still have work";
  {
    std::lock_guard<std::mutex> lock(log.mu);
    const std::string after = log.tags.substr(before);
    const size_t first = after.find('q'), last = after.rfind('q');
    ASSERT_NE(first, std::string::npos);
    EXPECT_EQ(last - first + 1, 40u) << "the demoted loop stepped while the promoted one had work: " << after;
    EXPECT_EQ(log.tags.find('x'), std::string::npos);
  }
}  // destruction with a loop still queued for a turn must not hang

}  // namespace
}  // namespace loragate
