// Exchange: one HTTP request and the way to answer it, handed to a route
// handler. Implemented by HttpSession over a socket (and by fakes in tests).
//
// Threading: every Exchange belongs to one connection strand. request(),
// record() and the answering methods must be called on that strand — from
// inside the handler itself, or inside a function given to post(), which is
// the only method any thread may call. An exchange is answered exactly once:
// either respond(), or start_stream() + send_chunk()* + end_stream().
// Calls after the client went away are ignored.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>

#include "gateway/metrics/request_observer.h"

namespace loragate {

namespace http = boost::beast::http;
using HttpRequest = http::request<http::string_body>;
using HttpResponse = http::response<http::string_body>;

class Exchange {
 public:
  Exchange(HttpRequest request, RequestRecord record)
      : request_(std::move(request)), record_(std::move(record)), arrival_(std::chrono::steady_clock::now()) {}
  virtual ~Exchange() = default;
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  const HttpRequest& request() const { return request_; }
  // The handler fills adapter, scenario, tokens and timings; the session sets status and e2e.
  RequestRecord& record() { return record_; }
  std::chrono::steady_clock::time_point arrival() const { return arrival_; }

  // Runs `fn` on this exchange's strand. Thread-safe.
  virtual void post(std::function<void()> fn) = 0;

  // Sends a complete response; content length, keep-alive and version are filled in.
  virtual void respond(HttpResponse response) = 0;
  // Starts a chunked response with `status` and `content_type`.
  virtual void start_stream(http::status status, std::string_view content_type) = 0;
  // Queues one piece of the body (writes coalesce while the socket is busy).
  virtual void send_chunk(std::string data) = 0;
  // Writes the last chunk; the exchange is over once it is written.
  virtual void end_stream() = 0;
  // True once the client closed the connection or a write failed.
  virtual bool client_gone() const = 0;
  // `fn` runs once, on the strand, if the client goes away before the answer is complete.
  virtual void on_client_gone(std::function<void()> fn) = 0;

 private:
  HttpRequest request_;
  RequestRecord record_;
  std::chrono::steady_clock::time_point arrival_;
};

}  // namespace loragate
