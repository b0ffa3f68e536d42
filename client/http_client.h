// A small synchronous HTTP/1.1 client for talking to a loragate server: the
// admin commands and the serving load generator use it.
//
// One HttpClient holds at most one keep-alive connection to one base URL and
// reuses it across calls; it is not thread-safe (use one per thread). Failures
// to connect, send or receive, and timeouts, come back as a failed Status
// (unavailable when the connection was refused: no server listens yet); an
// HTTP error status (404, 503, ...) is a successful exchange whose HttpResult
// carries the status and body (status_from_http turns it into a Status).
//
// Plain http:// only: TLS is refused with a clear message.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace loragate::client {

// A parsed base URL: http://host[:port][/prefix]. `prefix` (no trailing '/')
// is prepended to every request target.
struct Url {
  std::string host;    // a name or an address; IPv6 without brackets
  uint16_t port = 80;
  std::string prefix;  // "" or "/something"

  // "host:port" as sent in the Host header (IPv6 in brackets).
  std::string host_header() const;
  // "http://host:port/prefix", for messages.
  std::string to_string() const;
};

// Accepts "http://host:port", "http://host" (port 80), "host:port" (http
// assumed) and an optional path prefix; refuses https, other schemes, user
// info, queries, fragments and bad ports with an invalid_argument or
// unsupported Status that says why.
Result<Url> parse_url(std::string_view text);

// Percent-encodes one path segment (an adapter or scenario name).
std::string url_encode_segment(std::string_view segment);

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpResult {
  int status = 0;
  Headers headers;   // as received, in order
  std::string body;  // for stream(): only the body of a non-2xx or non-SSE response

  bool ok() const { return status >= 200 && status < 300; }
  // The first header of this name (case-insensitive), or "".
  std::string header(std::string_view name) const;
};

// One server-sent event: its `data:` lines joined by '\n', and its `event:`
// name ("" when absent).
struct SseEvent {
  std::string event;
  std::string data;
};

// Return false to stop reading the stream (the connection is then closed).
using SseCallback = std::function<bool(const SseEvent& event)>;

// An incremental text/event-stream parser: feed it bytes as they arrive, cut
// anywhere (inside a line, between '\r' and '\n'); it calls back once per
// complete event that has data. Comments and id/retry fields are ignored.
class SseParser {
 public:
  // Returns false when the callback asked to stop.
  bool feed(std::string_view bytes, const SseCallback& on_event);
  // Events completed so far.
  int64_t events() const { return events_; }

 private:
  bool line(std::string_view text, const SseCallback& on_event);

  std::string partial_;  // an unfinished line
  bool after_cr_ = false;  // the last byte was '\r': a following '\n' belongs to it
  std::string data_;
  std::string event_;
  bool has_data_ = false;
  int64_t events_ = 0;
};

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{5000};
  // The longest silence while sending or receiving: each write and read must
  // make progress within it. Zero: no limit.
  std::chrono::milliseconds read_timeout{60000};
  // The longest a whole exchange (request and response) may take. Zero: no limit.
  std::chrono::milliseconds total_timeout{0};
  // Bodies of request() larger than this fail (bytes).
  uint64_t max_body_bytes = 256ull << 20;
  std::string user_agent = "loragate-client";
};

class HttpClient {
 public:
  HttpClient(Url url, ClientOptions options = {});
  ~HttpClient();
  HttpClient(HttpClient&&) noexcept;
  HttpClient& operator=(HttpClient&&) noexcept;
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Parses `base_url` and makes a client for it (no connection yet).
  static Result<HttpClient> create(std::string_view base_url, ClientOptions options = {});

  const Url& url() const;
  const ClientOptions& options() const;

  // Sends `method target` (target relative to the URL's prefix, e.g.
  // "/v1/models") and reads the whole response. A JSON body gets
  // Content-Type: application/json unless `headers` names one.
  Result<HttpResult> request(std::string_view method, std::string_view target, std::string_view body = {},
                             const Headers& headers = {});

  // Like request(), but reads the body as it arrives: a 2xx text/event-stream
  // response calls `on_event` per event as soon as its bytes are in, and
  // leaves HttpResult::body empty; any other response is read whole into
  // HttpResult::body. Sends Accept: text/event-stream.
  Result<HttpResult> stream(std::string_view method, std::string_view target, std::string_view body,
                            const Headers& headers, const SseCallback& on_event);

  // Closes the kept-alive connection, if any.
  void close();
  // Connections opened so far (keep-alive reuse keeps this at 1).
  int64_t connections_opened() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The `error.message` of an OpenAI-style error body, else the body itself
// (trimmed, at most 300 bytes), else the HTTP reason phrase.
std::string error_message(const HttpResult& result);

// ok for 2xx; otherwise a Status whose message is "<status>: <error message>"
// (e.g. "404: adapter 'x' is not registered") and whose code follows the
// status: 404 not_found, 429/503 resource_exhausted, 501 unsupported, other
// 4xx invalid_argument, other 5xx internal.
Status status_from_http(const HttpResult& result);

}  // namespace loragate::client
