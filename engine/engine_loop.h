// EngineLoop: runs an Engine's step loop on its own thread and lets other
// threads (the gateway's) submit and cancel requests.
//
// submit() validates at once, on the caller's thread, so a bad request gets
// its error synchronously; accepted requests go through an inbox the loop
// drains before every step. Tokens and results reach each request's
// RequestSink on the loop thread. All public methods are thread-safe.
// Destruction stops the loop: requests still live are cancelled.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace loragate {

class EngineLoop {
 public:
  explicit EngineLoop(std::unique_ptr<Engine> engine);
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Validates and queues; request.sink must be set and outlive the request.
  Result<int64_t> submit(GenerationRequest request);
  // Cancels a live request (no-op for unknown or finished ids).
  void cancel(int64_t id);
  // A snapshot taken after the latest step.
  EngineStats stats() const;
  // The engine's immutable parts (config, tokenizer, options) for callers.
  const Engine& engine() const { return *engine_; }

 private:
  void run();

  std::unique_ptr<Engine> engine_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::pair<int64_t, GenerationRequest>> inbox_;  // guarded by mu_
  std::vector<int64_t> cancels_;                              // guarded by mu_
  bool stopping_ = false;                                     // guarded by mu_
  int64_t next_id_ = 1;                                       // guarded by mu_
  EngineStats stats_;                                         // guarded by mu_
  std::thread thread_;
};

}  // namespace loragate
