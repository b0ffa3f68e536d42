// GenerationRunner: runs an exchange's GenerationRequests (one per choice) on
// the EngineLoop of the base generation it captured.
// It bounds the HTTP requests in flight (429 past max_in_flight; a request's
// choices count once), refuses new ones while stopping (503), maps submit
// errors to OpenAI errors, starts the SSE stream, and cancels every engine
// request of the exchange when the client goes away.
// Every StreamSink is owned through a SinkLedger that the runner and the
// sinks share, until the engine finishes it: shutdown can cancel what is
// left and wait for it, and a sink the engine still holds when the runner
// is destroyed (shutdown past its bounded waits) stays alive and does its
// bookkeeping in the ledger, never in a freed runner.
//
// run() is called on an exchange's strand; the rest is thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "bases/serving_base.h"
#include "gateway/http/http_exchange.h"
#include "gateway/openai/response_format.h"

namespace loragate {

class ShadowTraffic;
class StreamSink;

// The sinks in flight. Shared by the runner and each of its sinks.
struct SinkLedger {
  // Called by a StreamSink from on_finish: forgets it (this may destroy it).
  void release(StreamSink* sink);

  std::mutex mu;
  std::condition_variable idle;
  std::map<StreamSink*, std::shared_ptr<StreamSink>> live;  // guarded by mu
  int32_t releasing = 0;                                    // guarded by mu; sinks being dropped
  bool stopping = false;                                    // guarded by mu
};

struct GenerationCall {
  std::shared_ptr<ServingBase> base;             // runs here, and is held until the request ends
  // One engine request per choice, in choice order: prompt p's j-th choice is
  // requests[p * n + j]. Prompt, params, adapter (the runner sets the sinks). At least one.
  std::vector<GenerationRequest> requests;
  int32_t n = 1;                                 // choices per prompt
  std::shared_ptr<ResponseFormat> format;        // shapes the answer
  bool stream = false;                           // answer with server-sent events
  bool include_usage = false;                    // streams: a usage chunk before [DONE]
};

class GenerationRunner {
 public:
  explicit GenerationRunner(int32_t max_in_flight);
  ~GenerationRunner();
  GenerationRunner(const GenerationRunner&) = delete;
  GenerationRunner& operator=(const GenerationRunner&) = delete;

  // Also offers every live request to `shadow` (not owned; null = none). Before serving.
  void set_shadow_traffic(ShadowTraffic* shadow) { shadow_ = shadow; }
  // Submits `call` and answers `exchange` when it finishes (or streams it).
  void run(const std::shared_ptr<Exchange>& exchange, GenerationCall call);

  // New requests get 503 from now on.
  void begin_stop();
  bool stopping() const;
  // Cancels every request in flight (their clients get 503 or an SSE error).
  void cancel_all();
  // Waits until no request is in flight or `deadline`; true when none is left.
  bool wait_idle(std::chrono::steady_clock::time_point deadline);
  // Stops every live sink from posting (call once the network threads are gone).
  void detach_all();
  size_t in_flight() const;

 private:
  const int32_t max_in_flight_;
  ShadowTraffic* shadow_ = nullptr;
  const std::shared_ptr<SinkLedger> ledger_;
};

}  // namespace loragate
