// HttpSession: one client connection. Reads requests with a fresh parser per
// message (body and header limits), hands each to the Router as an Exchange,
// and writes its answer — a whole response or a chunked stream — before it
// reads the next one (keep-alive; no pipelining: one exchange at a time).
//
// Everything runs on the connection's strand (the socket's executor), in
// do_x/on_x pairs. Timeouts: read_timeout for a request's header once its
// first byte arrived (and for the first request of a connection), again for
// its body (after a "100 Continue" when asked for), idle_timeout between
// keep-alive requests, write_timeout per write. While a handler works a
// PeerWatch (peer_watch.h) looks out for the client going away, which ends
// the exchange and runs its on_client_gone callbacks (they cancel the engine
// request). A client that only shut its sending side is still answered; the
// connection closes after the answer.
//
// Streamed answers go through a StreamWriter (stream_writer.h). A stream whose
// client reads slower than the engine writes queues at most
// max_stream_buffer_bytes; past that the client is treated as gone (its
// request cancelled, the connection closed, record().stream_overflow set).
//
// A request whose header frames its body in a way RFC 9112 refuses
// (request_framing.h) is answered 400/501 and the connection closed.
//
// Buffers and the serializer an async write uses live until that write's
// completion handler ran, whatever ended the exchange meanwhile.
//
// Owned by shared_ptr: pending operations and live Exchanges keep it alive.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>

#include "gateway/http/http_exchange.h"
#include "gateway/http/peer_watch.h"
#include "gateway/http/server_options.h"
#include "gateway/http/stream_writer.h"
#include "gateway/openai/openai_errors.h"

namespace loragate {

class Router;
class SessionTracker;

// What every session of one server shares; outlives the sessions.
struct SessionContext {
  ServerOptions options;
  const Router* router = nullptr;
  SessionTracker* tracker = nullptr;
  const std::atomic<bool>* draining = nullptr;                 // stop() began: finish the current exchange, then close
  std::function<void(const RequestRecord&)> on_request_done;  // log + observer; called on the strand
};

class HttpSession : public std::enable_shared_from_this<HttpSession>, private PeerWatch::Host {
 public:
  HttpSession(boost::asio::ip::tcp::socket socket, std::shared_ptr<const SessionContext> context);
  ~HttpSession() override;
  HttpSession(const HttpSession&) = delete;
  HttpSession& operator=(const HttpSession&) = delete;

  // Begins reading; call once, after registering with the tracker.
  void start(uint64_t tracker_key);
  // Thread-safe. Closes now when between requests; otherwise after the current answer.
  void close_when_idle();
  // Thread-safe. Closes now; a request in flight sees its client go away.
  void force_close();

 private:
  class SessionExchange;
  enum class State { kIdle, kReading, kHandling, kClosed };

  void do_wait_request();
  void on_first_bytes(boost::beast::error_code ec, size_t n);
  void do_read();
  void on_header(boost::beast::error_code ec, size_t n);
  void do_read_body();
  void on_read(boost::beast::error_code ec, size_t n);
  void reply_and_linger(const ApiError& error);
  void on_error_written(boost::beast::error_code ec, size_t n);
  void do_linger();
  void on_linger(boost::beast::error_code ec, size_t n);
  void do_close();

  // The Exchange's operations; `seq` ignores calls from exchanges already over.
  void respond(uint64_t seq, HttpResponse response);
  void on_response_written(bool keep_alive, boost::beast::error_code ec, size_t n);
  void start_stream(uint64_t seq, http::status status, std::string_view content_type);
  void send_chunk(uint64_t seq, std::string data);
  void end_stream(uint64_t seq);
  StreamWriter::OnWritten stream_written();
  void on_stream_written(boost::beast::error_code ec, size_t n);
  void on_client_gone(uint64_t seq, std::function<void()> fn);
  bool live(uint64_t seq) const { return seq == seq_ && state_ == State::kHandling && !answered_ && !gone_; }

  // PeerWatch::Host: what the watch asks and tells.
  bool wants_watch() const override;
  bool awaits_answer(uint64_t seq) const override { return live(seq); }
  void peer_done_sending() override { closing_ = true; }  // nothing more can be read: close after this answer
  void peer_gone() override { connection_lost(); }

  void connection_lost();
  void finish_exchange();
  bool keep_alive_after() const;
  void after_answer(bool keep_alive);

  boost::beast::tcp_stream stream_;
  std::shared_ptr<const SessionContext> ctx_;
  uint64_t tracker_key_ = 0;
  boost::beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  State state_ = State::kIdle;
  uint64_t served_ = 0;          // requests read on this connection
  bool closing_ = false;         // close after the current answer

  // The exchange being handled.
  uint64_t seq_ = 0;
  std::shared_ptr<SessionExchange> current_;
  bool request_keep_alive_ = false;
  bool answered_ = false;        // respond() or start_stream() was called
  bool gone_ = false;            // the client went away (or a write failed)
  std::unique_ptr<PeerWatch> watch_;
  std::vector<std::function<void()>> gone_callbacks_;

  // Whole responses.
  std::shared_ptr<HttpResponse> response_;
  // Streams.
  StreamWriter writer_;
  std::shared_ptr<HttpResponse> error_response_;
  char linger_buf_[4096];
};

}  // namespace loragate
