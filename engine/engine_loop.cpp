#include "engine/engine_loop.h"

#include <cstdio>

namespace loragate {

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {
  stats_ = engine_->stats();
  thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

Result<int64_t> EngineLoop::submit(GenerationRequest request) {
  if (request.sink == nullptr) return Status::invalid_argument("EngineLoop::submit needs a sink");
  LG_RETURN_IF_ERROR(engine_->validate_request(request));  // reads only immutable state
  int64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status::resource_exhausted("the engine is shutting down");
    id = next_id_++;
    inbox_.emplace_back(id, std::move(request));
  }
  wake_.notify_one();
  return id;
}

void EngineLoop::cancel(int64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancels_.push_back(id);
  }
  wake_.notify_one();
}

EngineStats EngineLoop::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void EngineLoop::run() {
  std::vector<std::pair<int64_t, GenerationRequest>> arrivals;
  std::vector<int64_t> cancels;
  for (;;) {
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || !inbox_.empty() || !cancels_.empty() || engine_->has_unfinished(); });
      arrivals.swap(inbox_);
      cancels.swap(cancels_);
      stopping = stopping_;
    }
    for (auto& [id, request] : arrivals) {
      RequestSink* sink = request.sink;
      Result<int64_t> added = engine_->add_request(std::move(request), id);
      if (!added.is_ok()) {  // validated in submit(), so only an internal failure lands here
        GenerationResult failed;
        failed.id = id;
        failed.finish_reason = FinishReason::kCancelled;
        sink->on_finish(failed);
      }
    }
    arrivals.clear();
    // A cancel may name a request that arrived in this same batch: apply after adding.
    for (int64_t id : cancels) engine_->cancel(id);
    cancels.clear();
    if (stopping) {
      engine_->cancel_all();
      break;
    }
    if (engine_->has_unfinished()) {
      Status s = engine_->step();
      if (!s.is_ok()) {  // never spin on a broken step: end every request, each sink hears of it
        std::fprintf(stderr, "loragate: engine step failed, cancelling live requests: %s\n", s.to_string().c_str());
        engine_->cancel_all();
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    stats_ = engine_->stats();
  }
}

}  // namespace loragate
