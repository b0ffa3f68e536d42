#include "engine/engine_loop.h"

#include <pthread.h>

#include <cstdio>
#include <utility>

#include "engine/engine.h"

namespace loragate {

Result<std::unique_ptr<EngineLoop>> EngineLoop::start(std::shared_ptr<const ModelDir> model,
                                                      const EngineOptions& options, std::shared_ptr<ComputeGate> gate,
                                                      bool serving) {
  LG_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::load(std::move(model), options));
  return std::make_unique<EngineLoop>(std::move(engine), std::move(gate), serving);
}

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine, std::shared_ptr<ComputeGate> gate, bool serving)
    : engine_(std::move(engine)), gate_(std::move(gate)), serving_(serving) {
  stats_ = engine_->stats();
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "lg-step");  // for top -H, gdb and the tests that watch it
    run();
  });
}

EngineLoop::~EngineLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    news_.store(true);
  }
  wake_.notify_all();
  if (gate_ != nullptr) gate_->wake_waiters();
  thread_.join();
}

void EngineLoop::notify_loop() {
  wake_.notify_one();
  if (gate_ != nullptr) gate_->wake_waiters();
}

GateClass EngineLoop::turn_class() const {
  if (!engine_->has_live_work()) return GateClass::kBackground;
  return serving_.load() ? GateClass::kServing : GateClass::kCandidate;
}

void EngineLoop::set_serving(bool serving) {
  if (serving_.exchange(serving) == serving) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    news_.store(true);  // a turn queued in the old class is requeued in the new one
  }
  notify_loop();
}

Result<int64_t> EngineLoop::submit(GenerationRequest request) {
  if (request.sink == nullptr) return Status::invalid_argument("EngineLoop::submit needs a sink");
  LG_RETURN_IF_ERROR(engine_->validate_request(request));  // reads only immutable state
  int64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status::unavailable("the engine is shutting down");
    id = next_id_++;
    inbox_.emplace_back(id, std::move(request));
    news_.store(true);
  }
  notify_loop();
  return id;
}

void EngineLoop::cancel(int64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancels_.push_back(id);
    news_.store(true);
  }
  notify_loop();
}

void EngineLoop::reset_prefix_cache() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    reset_prefix_cache_ = true;
    news_.store(true);
  }
  notify_loop();
}

EngineStats EngineLoop::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Status EngineLoop::health() const { return engine_->health(); }

const ModelDir& EngineLoop::model() const { return engine_->model(); }
const EngineOptions& EngineLoop::options() const { return engine_->options(); }
int64_t EngineLoop::max_model_len() const { return engine_->max_model_len(); }
AdapterCatalog* EngineLoop::adapters() const { return engine_->adapters(); }
MemoryEstimate EngineLoop::memory() const { return measure_engine_memory(*engine_); }

void EngineLoop::run() {
  std::vector<std::pair<int64_t, GenerationRequest>> arrivals;
  std::vector<int64_t> cancels;
  // With a gate: the turn for the next step, queued or granted, while the engine has work.
  ComputeGate::Turn turn;
  bool stalled = false;  // the last step made no progress: every request waits on an adapter load
  for (;;) {
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto news = [&] { return stopping_ || !inbox_.empty() || !cancels_.empty() || reset_prefix_cache_; };
      if (stalled) {
        // Nothing to do until a load lands: poll gently instead of spinning a core.
        wake_.wait_for(lock, kStalledPoll, news);
      } else if (!engine_->has_unfinished()) {
        // Idle: also wake now and then to free what removed adapters held.
        if (!wake_.wait_for(lock, kIdleHousekeeping, news)) engine_->collect_removed_adapters();
      }
      // Before this batch's arrivals: a request submitted after the reset never sees an old prefix.
      if (std::exchange(reset_prefix_cache_, false)) engine_->reset_prefix_cache();
      arrivals.swap(inbox_);
      cancels.swap(cancels_);
      stopping = stopping_;
      news_.store(false);
    }
    for (auto& [id, request] : arrivals) {
      RequestSink* sink = request.sink;
      Result<int64_t> added = engine_->add_request(std::move(request), id);
      if (!added.is_ok()) {  // valid at submit(); e.g. its adapter was removed since
        GenerationResult failed;
        failed.id = id;
        failed.finish_reason = FinishReason::kError;
        failed.error = added.status().message();
        failed.error_code = added.status().code();
        sink->on_finish(failed);
      }
    }
    arrivals.clear();
    // A cancel may name a request that arrived in this same batch: apply after adding.
    for (int64_t id : cancels) engine_->cancel(id);
    cancels.clear();
    if (stopping) {
      turn.reset();
      engine_->cancel_all();
      break;
    }
    stalled = false;
    if (!engine_->has_unfinished()) {
      turn.reset();  // nothing to step: give up the place (or the turn) at once
    } else {
      if (gate_ != nullptr) {
        const GateClass wanted = turn_class();
        if (!turn.empty() && turn.gate_class() != wanted) turn.reset();
        if (turn.empty()) turn = gate_->enqueue(wanted);
        // News (arrivals, cancels, stop, a class change) first; the place in the queue is kept.
        if (!turn.wait(&news_) || turn.gate_class() != turn_class()) continue;
      }
      Status s = engine_->step();
      if (!s.is_ok()) {  // step() ended its requests with the error, each sink heard of it
        std::fprintf(stderr, "loragate: engine step failed, live requests ended with an error: %s\n",
                     s.to_string().c_str());
        engine_->fail_all(engine_->health());  // never spin on a broken step (step() leaves none live)
      }
      stalled = !engine_->made_progress();
      if (gate_ != nullptr) {
        // Queue for the next step before handing this turn on, so that the
        // gate counts this loop as contending (compute_gate.h); a stalled
        // loop sleeps first and queues again after.
        ComputeGate::Turn next =
            engine_->has_unfinished() && !stalled ? gate_->enqueue(turn_class()) : ComputeGate::Turn();
        turn = std::move(next);  // releases the turn just used
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    stats_ = engine_->stats();
  }
}

}  // namespace loragate
