#include "gateway/http/http_session.h"

#include <algorithm>
#include <cstdio>
#include <exception>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "gateway/http/request_framing.h"
#include "gateway/http/router.h"
#include "gateway/http/session_tracker.h"
#include "gateway/openai/openai_errors.h"

namespace loragate {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr size_t kReadChunk = 4096;
constexpr std::chrono::milliseconds kMaxLinger{2000};  // how long an error close drains unread input

std::atomic<uint64_t> g_next_request_id{1};

bool is_parse_error(const beast::error_code& ec) {
  return ec.category() == beast::http::make_error_code(http::error::bad_target).category();
}

}  // namespace

// The Exchange a handler sees: forwards to the session, tagged with its sequence number.
class HttpSession::SessionExchange final : public Exchange {
 public:
  SessionExchange(std::shared_ptr<HttpSession> session, uint64_t seq, HttpRequest request, RequestRecord record)
      : Exchange(std::move(request), std::move(record)), session_(std::move(session)), seq_(seq) {}

  void post(std::function<void()> fn) override {
    net::post(session_->stream_.get_executor(), [s = session_, fn = std::move(fn)] { fn(); });
  }
  void respond(HttpResponse response) override { session_->respond(seq_, std::move(response)); }
  void start_stream(http::status status, std::string_view content_type) override {
    session_->start_stream(seq_, status, content_type);
  }
  void send_chunk(std::string data) override { session_->send_chunk(seq_, std::move(data)); }
  void end_stream() override { session_->end_stream(seq_); }
  bool client_gone() const override { return session_->seq_ != seq_ || session_->gone_; }
  void on_client_gone(std::function<void()> fn) override { session_->on_client_gone(seq_, std::move(fn)); }

 private:
  std::shared_ptr<HttpSession> session_;
  uint64_t seq_;
};

HttpSession::HttpSession(tcp::socket socket, std::shared_ptr<const SessionContext> context)
    : stream_(std::move(socket)),
      ctx_(std::move(context)),
      watch_(make_socket_peer_watch(stream_.socket())),
      writer_(stream_, ctx_->options.write_timeout, ctx_->options.max_stream_buffer_bytes) {}

HttpSession::~HttpSession() {
  if (tracker_key_ != 0) ctx_->tracker->remove(tracker_key_);
}

void HttpSession::start(uint64_t tracker_key) {
  tracker_key_ = tracker_key;
  net::dispatch(stream_.get_executor(), beast::bind_front_handler(&HttpSession::do_wait_request, shared_from_this()));
}

void HttpSession::close_when_idle() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    self->closing_ = true;
    if (self->state_ == State::kIdle || self->state_ == State::kReading) self->do_close();
  });
}

void HttpSession::force_close() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    self->closing_ = true;
    if (self->state_ == State::kHandling && !self->gone_) {
      self->connection_lost();
    } else {
      self->do_close();
    }
  });
}

// --- reading -----------------------------------------------------------------

void HttpSession::do_wait_request() {
  state_ = State::kIdle;
  if (closing_ || ctx_->draining->load()) return do_close();
  if (buffer_.size() > 0) return do_read();  // the client already sent (part of) the next request
  // A new connection gets read_timeout to start its first request; later ones idle_timeout.
  stream_.expires_after(served_ == 0 ? ctx_->options.read_timeout : ctx_->options.idle_timeout);
  stream_.async_read_some(buffer_.prepare(kReadChunk),
                          beast::bind_front_handler(&HttpSession::on_first_bytes, shared_from_this()));
}

void HttpSession::on_first_bytes(beast::error_code ec, size_t n) {
  if (ec) return do_close();  // idle timeout, EOF, or closed by stop()
  buffer_.commit(n);
  do_read();
}

void HttpSession::do_read() {
  state_ = State::kReading;
  parser_.emplace();
  parser_->body_limit(ctx_->options.max_body_bytes);
  parser_->header_limit(ctx_->options.max_header_bytes);
  stream_.expires_after(ctx_->options.read_timeout);
  http::async_read_header(stream_, buffer_, *parser_,
                          beast::bind_front_handler(&HttpSession::on_header, shared_from_this()));
}

void HttpSession::on_header(beast::error_code ec, size_t n) {
  if (ec) return on_read(ec, n);
  // Before the body: a framing the parser accepted may still be one we must refuse.
  if (std::optional<ApiError> bad = check_request_framing(parser_->get())) return reply_and_linger(*bad);
  if (parser_->is_done()) return on_read(ec, n);
  // curl and others wait for "100 Continue" before sending a large body.
  const HttpRequest& req = parser_->get();
  if (req.version() >= 11 && beast::iequals(req[http::field::expect], "100-continue")) {
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    net::async_write(stream_, net::buffer(kContinue), [self = shared_from_this()](beast::error_code wec, size_t) {
      if (wec) return self->do_close();
      self->do_read_body();
    });
    return;
  }
  do_read_body();
}

void HttpSession::do_read_body() {
  stream_.expires_after(ctx_->options.read_timeout);
  http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&HttpSession::on_read, shared_from_this()));
}

void HttpSession::on_read(beast::error_code ec, size_t) {
  if (ec == http::error::body_limit) {
    return reply_and_linger({http::status::payload_too_large,
                             "request body exceeds the limit of " + std::to_string(ctx_->options.max_body_bytes) +
                                 " bytes",
                             "", ""});
  }
  if (ec == http::error::header_limit) {
    return reply_and_linger({http::status::request_header_fields_too_large,
                             "request headers exceed the limit of " +
                                 std::to_string(ctx_->options.max_header_bytes) + " bytes",
                             "", ""});
  }
  if (ec && is_parse_error(ec) && ec != http::error::end_of_stream && ec != http::error::partial_message) {
    return reply_and_linger(bad_request("malformed HTTP request: " + ec.message()));
  }
  if (ec) return do_close();  // timeout, EOF, reset, or closed by stop()

  stream_.expires_never();
  ++served_;
  RequestRecord record;
  record.id = g_next_request_id.fetch_add(1);
  HttpRequest request = parser_->release();
  parser_.reset();
  record.method = std::string(request.method_string());
  record.path = std::string(Router::path_of(request.target()));
  request_keep_alive_ = request.keep_alive();
  state_ = State::kHandling;
  answered_ = false;
  gone_ = false;
  gone_callbacks_.clear();
  current_ = std::make_shared<SessionExchange>(shared_from_this(), ++seq_, std::move(request), std::move(record));
  std::shared_ptr<PeerWatch::Host> host(shared_from_this(), this);  // aliased: Host is a private base
  watch_->watch(std::move(host), seq_, current_->request().version());
  std::shared_ptr<Exchange> exchange = current_;
  try {
    ctx_->router->dispatch(exchange);
  } catch (const std::exception& e) {  // a handler bug must not take the server down
    std::fprintf(stderr, "loragate: handler for %s threw: %s\n", exchange->record().path.c_str(), e.what());
    respond(seq_, error_response(http::status::internal_server_error, std::string("internal error: ") + e.what()));
  }
}

// A request that could not be parsed: answer, stop sending, and drain what the
// client still sends so that it reads our answer rather than a reset.
void HttpSession::reply_and_linger(const ApiError& error) {
  state_ = State::kClosed;
  if (ctx_->on_request_done) {  // observed like any other answer, with what is known of the request
    RequestRecord record;
    record.id = g_next_request_id.fetch_add(1);
    if (parser_ && parser_->is_header_done()) {
      record.method = std::string(parser_->get().method_string());
      record.path = std::string(Router::path_of(parser_->get().target()));
    }
    record.status = static_cast<int>(error.status);
    ctx_->on_request_done(record);
  }
  error_response_ = std::make_shared<HttpResponse>(error.to_response());
  error_response_->set(http::field::server, "loragate");
  error_response_->keep_alive(false);
  error_response_->prepare_payload();
  stream_.expires_after(ctx_->options.write_timeout);
  http::async_write(stream_, *error_response_,
                    beast::bind_front_handler(&HttpSession::on_error_written, shared_from_this()));
}

void HttpSession::on_error_written(beast::error_code ec, size_t) {
  if (ec) return do_close();
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream_.expires_after(std::min<std::chrono::milliseconds>(ctx_->options.read_timeout, kMaxLinger));
  do_linger();
}

void HttpSession::do_linger() {
  stream_.async_read_some(net::buffer(linger_buf_),
                          beast::bind_front_handler(&HttpSession::on_linger, shared_from_this()));
}

void HttpSession::on_linger(beast::error_code ec, size_t) {
  if (ec) return do_close();
  do_linger();
}

void HttpSession::do_close() {
  state_ = State::kClosed;
  watch_->cancel();
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.close();
}

// --- answering ---------------------------------------------------------------

bool HttpSession::keep_alive_after() const {
  return request_keep_alive_ && !closing_ && !ctx_->draining->load();
}

void HttpSession::respond(uint64_t seq, HttpResponse response) {
  if (!live(seq)) return;
  answered_ = true;
  const bool keep_alive = keep_alive_after();
  response.version(current_->request().version());
  response.keep_alive(keep_alive);
  response.set(http::field::server, "loragate");
  response.set("X-Request-Id", std::to_string(current_->record().id));
  if (!current_->record().base.empty()) response.set("X-Base", current_->record().base);
  if (!current_->record().adapter.empty()) response.set("X-Adapter", current_->record().adapter);
  response.prepare_payload();
  current_->record().status = response.result_int();
  response_ = std::make_shared<HttpResponse>(std::move(response));
  stream_.expires_after(ctx_->options.write_timeout);
  http::async_write(stream_, *response_,
                    beast::bind_front_handler(&HttpSession::on_response_written, shared_from_this(), keep_alive));
}

void HttpSession::on_response_written(bool keep_alive, beast::error_code ec, size_t) {
  stream_.expires_never();
  response_.reset();
  if (ec) return connection_lost();
  after_answer(keep_alive);
}

void HttpSession::after_answer(bool keep_alive) {
  finish_exchange();
  if (!keep_alive || closing_) return do_close();
  do_wait_request();
}

void HttpSession::start_stream(uint64_t seq, http::status status, std::string_view content_type) {
  if (!live(seq)) return;
  answered_ = true;
  const unsigned version = current_->request().version();
  const bool chunked = version >= 11;  // HTTP/1.0 has no chunks: the body ends when the connection does
  StreamWriter::Head head(status, version);
  head.set(http::field::content_type, content_type);
  head.set(http::field::cache_control, "no-cache");
  head.set(http::field::server, "loragate");
  head.set("X-Request-Id", std::to_string(current_->record().id));
  if (!current_->record().base.empty()) head.set("X-Base", current_->record().base);
  if (!current_->record().adapter.empty()) head.set("X-Adapter", current_->record().adapter);
  head.keep_alive(chunked && keep_alive_after());
  if (chunked) head.chunked(true);
  current_->record().status = static_cast<int>(status);
  current_->record().streamed = true;
  writer_.start(std::move(head), stream_written());
}

void HttpSession::send_chunk(uint64_t seq, std::string data) {
  if (seq != seq_ || !writer_.accepts_pieces() || gone_ || data.empty()) return;
  if (!writer_.send(std::move(data), stream_written())) {
    // The client reads slower than the engine writes: it is cut off like a client that left.
    current_->record().stream_overflow = true;
    return connection_lost();
  }
}

void HttpSession::end_stream(uint64_t seq) {
  if (seq != seq_ || !writer_.accepts_pieces() || gone_) return;
  writer_.end(stream_written());
}

StreamWriter::OnWritten HttpSession::stream_written() {
  return beast::bind_front_handler(&HttpSession::on_stream_written, shared_from_this());
}

void HttpSession::on_stream_written(beast::error_code ec, size_t) {
  // gone_: the exchange ended while this write was on its way.
  switch (writer_.on_written(!ec && !gone_, stream_written())) {
    case StreamWriter::Written::kFailed:
      return connection_lost();
    case StreamWriter::Written::kFinished:
      return after_answer(writer_.keep_alive());
    case StreamWriter::Written::kGoingOn:
      return;  // more to write, or waiting for the handler
  }
}

// --- client going away -------------------------------------------------------

void HttpSession::on_client_gone(uint64_t seq, std::function<void()> fn) {
  if (seq != seq_) return;  // a later exchange runs: this one was answered in full
  if (gone_) {
    fn();  // already gone (a handler that registers late still gets told)
    return;
  }
  if (state_ == State::kHandling && current_) gone_callbacks_.push_back(std::move(fn));
}

// The last write is on its way: the client may well have read it all and
// closed. That write's own completion decides how the exchange ended.
// Note: the writer stays kFinished after a stream until the next stream
// starts, so a later exchange on this connection that answers whole is not
// watched. Kept as it was when the watch moved to its own file.
bool HttpSession::wants_watch() const {
  if (state_ != State::kHandling || gone_ || !current_) return false;
  return !response_ && writer_.state() != StreamWriter::State::kFinished;
}

void HttpSession::connection_lost() {
  if (state_ != State::kHandling || gone_) return do_close();
  gone_ = true;
  closing_ = true;
  if (current_ && !writer_.end_on_its_way()) current_->record().status = 499;  // nginx: client closed request
  std::vector<std::function<void()>> callbacks;
  callbacks.swap(gone_callbacks_);
  for (auto& fn : callbacks) fn();
  finish_exchange();
  do_close();  // cancels a write in flight; its handler still runs, and releases its buffers
}

void HttpSession::finish_exchange() {
  if (!current_) return;
  RequestRecord& record = current_->record();
  record.e2e_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - current_->arrival()).count();
  if (ctx_->on_request_done) ctx_->on_request_done(record);
  current_.reset();
  gone_callbacks_.clear();
  writer_.abandon();  // frees the stream's buffers once no write holds them
}

}  // namespace loragate
