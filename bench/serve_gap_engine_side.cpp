// The engine side of `loragate bench serve-gap`: the workload submitted to an
// EngineLoop in this process, its results collected as they finish.
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "bench/bench_util.h"
#include "bench/serve_gap_sides.h"
#include "engine/compute_gate.h"

namespace loragate::bench::serve_gap_detail {
namespace {

// Results of one run, by engine request id (on_finish runs on the step thread).
class RunCollector final : public RequestSink {
 public:
  void on_token(int64_t, int32_t, std::string_view) override {}
  void on_finish(const GenerationResult& result) override {
    std::lock_guard<std::mutex> lock(mu_);
    results_[result.id] = result;
    last_finish_ = BenchClock::now();
    if (results_.size() >= wanted_) done_.notify_all();  // only the last one wakes the waiter
  }
  // Waits for `count` results; returns them and when the last came.
  std::map<int64_t, GenerationResult> wait(size_t count, BenchClock::time_point* last_finish) {
    std::unique_lock<std::mutex> lock(mu_);
    wanted_ = count;
    done_.wait(lock, [&] { return results_.size() >= count; });
    *last_finish = last_finish_;
    return std::move(results_);
  }

 private:
  std::mutex mu_;
  std::condition_variable done_;
  std::map<int64_t, GenerationResult> results_;  // guarded by mu_
  BenchClock::time_point last_finish_;           // guarded by mu_
  size_t wanted_ = SIZE_MAX;                     // guarded by mu_
};

}  // namespace

Result<std::unique_ptr<EngineSide>> EngineSide::load(const ServeGapOptions& o) {
  LG_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::load(o.model_dir, serve_engine_options(o)));
  for (int i = 0; i < o.adapters; ++i) {
    LG_RETURN_IF_ERROR(engine->adapters()->add(adapter_name(i), adapter_dir(o.adapters_dir, i)));
  }
  // As ServingBase::load builds serve's loop: every step takes a turn of the base set's gate.
  auto gate = std::make_shared<ComputeGate>(kServeCandidateShare);
  return std::unique_ptr<EngineSide>(
      new EngineSide(std::make_unique<EngineLoop>(std::move(engine), std::move(gate), /*serving=*/true)));
}

Result<SideRun> EngineSide::run(const Workload& w) {
  RunCollector collector;
  std::vector<GenerationRequest> requests;
  for (size_t i = 0; i < w.size(); ++i) {
    GenerationRequest r;  // greedy, EOS ignored: exactly new_tokens, as the HTTP body asks
    r.prompt_ids = w.prompts[i];
    r.params.temperature = 0.0f;
    r.params.max_tokens = w.new_tokens;
    r.params.ignore_eos = true;
    r.adapter = w.adapters[i];
    r.sink = &collector;
    requests.push_back(std::move(r));
  }
  std::vector<int64_t> ids;
  BenchClock::time_point last;
  const int64_t steps_before = settled_stats().steps;
  const BenchClock::time_point start = BenchClock::now();
  for (GenerationRequest& r : requests) {
    Result<int64_t> id = loop_->submit(std::move(r));
    if (!id.is_ok()) {
      for (int64_t live : ids) loop_->cancel(live);
      collector.wait(ids.size(), &last);  // they must end before `collector` does
      return id.status().with_context("engine side: submit");
    }
    ids.push_back(*id);
  }
  std::map<int64_t, GenerationResult> results = collector.wait(ids.size(), &last);
  SideRun run;
  run.wall_s = std::chrono::duration<double>(last - start).count();
  run.steps = settled_stats().steps - steps_before;
  for (int64_t id : ids) {
    const GenerationResult& r = results.at(id);
    if (r.finish_reason != FinishReason::kLength) {
      return Status::internal(std::string("engine side: a request ended with '") +
                              finish_reason_name(r.finish_reason) + "': " + r.error);
    }
    run.tokens.push_back(static_cast<int64_t>(r.output_ids.size()));
    run.text.push_back(r.text);
  }
  return run;
}

// The loop's stats once the step that finished the last request has been counted.
EngineStats EngineSide::settled_stats() const {
  const BenchClock::time_point limit = BenchClock::now() + kSettleLimit;
  EngineStats s = loop_->stats();
  while ((s.running > 0 || s.waiting > 0) && BenchClock::now() < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    s = loop_->stats();
  }
  return s;
}

}  // namespace loragate::bench::serve_gap_detail
