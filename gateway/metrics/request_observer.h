// RequestRecord and RequestObserver: what one HTTP request did, reported once
// when it ends (response written, or the client went away).
//
// The gateway fills a RequestRecord per request and hands it to the observer
// (metrics: counts by adapter/status, TTFT and latency histograms) and to the
// request log. Observers are called on the network threads, concurrently for
// different requests: they must be thread-safe and cheap.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loragate {

struct RequestRecord {
  uint64_t id = 0;                  // unique per process; also X-Request-Id and the cmpl-/chatcmpl- suffix
  std::string method;               // "GET", "POST", ...
  std::string path;                 // target without the query string
  std::string route;                // the matched route pattern ("" when none matched)
  std::string model;                // `model` as the client sent it
  std::string adapter;              // the adapter that served it; "" = the base alone
  std::string scenario;             // the scenario it named; "" = none
  std::string base;                 // the base generation that served it; "" = none resolved
  int status = 0;                   // HTTP status; 499 when the client went away first
  bool streamed = false;            // answered with server-sent events
  bool stream_overflow = false;     // cut off: the client read the stream slower than it was generated
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::string finish_reason;        // "length", "stop", "cancelled", "error"; "" when nothing ran
  double queue_ms = -1;             // engine: arrival -> first scheduled; < 0 = not measured
  double ttft_ms = -1;              // engine: arrival -> first token; < 0 = not measured
  std::vector<double> itl_ms;       // engine: gaps between consecutive tokens
  double e2e_ms = 0;                // gateway: request read -> response written
};

class RequestObserver {
 public:
  virtual ~RequestObserver() = default;
  // Called exactly once per request: when its answer is written, when the
  // client leaves first (status 499), or when it is refused unread (400,
  // 413, 431: method and path are then empty when the header was not read).
  virtual void on_request_done(const RequestRecord& record) = 0;
};

// The default: observes nothing.
class NullRequestObserver final : public RequestObserver {
 public:
  void on_request_done(const RequestRecord&) override {}
};

}  // namespace loragate
