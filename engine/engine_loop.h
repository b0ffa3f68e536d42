// EngineLoop: runs an Engine's step loop on its own thread and lets other
// threads (the gateway's) submit and cancel requests.
//
// submit() validates at once, on the caller's thread, so a bad request gets
// its error synchronously; accepted requests go through an inbox the loop
// drains before every step. Tokens and results reach each request's
// RequestSink on the loop thread. All public methods are thread-safe.
// Destruction stops the loop: requests still live are cancelled.
//
// A step that fails ends its requests with an internal error (Engine::step)
// and makes the loop unhealthy for good: health() says why, for readiness
// probes (a device error is usually sticky; the replica wants a restart).
//
// With a ComputeGate (shared with other loops on the same cores), every
// engine step runs inside a turn of the gate, of the serving or the
// candidate class as serving() says when the turn is requested, or of the
// background class while every request of the engine is background-priority
// (in-server evaluations): then the loop steps only while no other loop's
// live work is queued, on the serving base as on a candidate. While its
// engine has work the loop queues for its next turn before giving back the
// current one, so the gate sees it as contending the whole time (see
// compute_gate.h). Cancels, submissions and destruction interrupt a wait for
// a turn: a cancelled request ends without waiting for compute.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "adapters/adapter_catalog.h"
#include "engine/compute_gate.h"
#include "engine/engine_types.h"
#include "engine/memory_estimate.h"
#include "model/model_dir.h"

namespace loragate {

class Engine;  // engine/engine.h: the engine's own side, not shown above it

class EngineLoop {
 public:
  // How long a loop whose requests all wait on adapter loads sleeps between steps.
  static constexpr std::chrono::milliseconds kStalledPoll{1};
  // How often an idle loop frees the slots and memory of removed adapters.
  static constexpr std::chrono::milliseconds kIdleHousekeeping{100};
  // Loads `model` into an engine (Engine::load) and starts its loop.
  static Result<std::unique_ptr<EngineLoop>> start(std::shared_ptr<const ModelDir> model,
                                                   const EngineOptions& options,
                                                   std::shared_ptr<ComputeGate> gate = nullptr, bool serving = true);
  // `gate` null: steps run whenever there is work (one loop owns the cores).
  explicit EngineLoop(std::unique_ptr<Engine> engine, std::shared_ptr<ComputeGate> gate = nullptr,
                      bool serving = true);
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Validates and queues; request.sink must be set and outlive the request.
  Result<int64_t> submit(GenerationRequest request);
  // Cancels a live request (no-op for unknown or finished ids).
  void cancel(int64_t id);
  // A snapshot taken after the latest step.
  EngineStats stats() const;
  // ok, or the first failed step's error (internal): the engine is unhealthy (Engine::health).
  Status health() const;
  // The engine's immutable parts, for every caller.
  const ModelDir& model() const;  // config, tokenizer (may be null), chat template, sha256
  const EngineOptions& options() const;
  int64_t max_model_len() const;  // prompt + output tokens a request may have
  // The engine's adapters; null when options().max_loras is 0.
  AdapterCatalog* adapters() const;
  // Forgets every cached prefix before the next step (requests already
  // running keep their blocks): later requests are computed cold.
  void reset_prefix_cache();
  // Weights, KV pool and LoRA slots as allocated (measure_engine_memory).
  MemoryEstimate memory() const;
  // The engine itself, for the engine's own tests and tools (engine/engine.h).
  const Engine& engine() const { return *engine_; }
  // Which class of the gate's turns this loop takes for live work (read each
  // time it queues for a turn; a turn already queued in another class is requeued).
  void set_serving(bool serving);
  bool serving() const { return serving_.load(); }
  const std::shared_ptr<ComputeGate>& gate() const { return gate_; }

 private:
  void run();
  // The gate class of the next turn: background while the engine has no live work (loop thread only).
  GateClass turn_class() const;
  // Wakes the loop for news (arrivals, cancels, stop, a class change), also out of a wait for a turn.
  void notify_loop();

  std::unique_ptr<Engine> engine_;
  const std::shared_ptr<ComputeGate> gate_;
  std::atomic<bool> serving_;
  std::atomic<bool> news_{false};  // set with inbox_/cancels_/stopping_, cleared when the loop drains them
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::pair<int64_t, GenerationRequest>> inbox_;  // guarded by mu_
  std::vector<int64_t> cancels_;                              // guarded by mu_
  bool stopping_ = false;                                     // guarded by mu_
  bool reset_prefix_cache_ = false;                           // guarded by mu_
  int64_t next_id_ = 1;                                       // guarded by mu_
  EngineStats stats_;                                         // guarded by mu_
  std::thread thread_;
};

}  // namespace loragate
