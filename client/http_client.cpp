// HttpClient: one keep-alive connection, requests and SSE streams with
// timeouts and a retry on a stale connection, and the error helpers
// (error_message, status_from_http). URLs are in url.cpp, SSE parsing in
// sse_parser.cpp.
#include "client/http_client.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "client/http_text.h"

namespace loragate::client {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using Clock = std::chrono::steady_clock;

using text::iequals;
using text::lower;
using text::trim;

namespace {

bool has_header(const Headers& headers, std::string_view name) {
  return std::any_of(headers.begin(), headers.end(), [&](const auto& h) { return iequals(h.first, name); });
}

// Errors of a kept-alive connection the server closed while idle: the request
// never reached it, so sending it again on a fresh connection is safe.
bool stale_connection_error(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::error::connection_aborted;
}

}  // namespace

std::string HttpResult::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (iequals(k, name)) return v;
  }
  return "";
}

// --- the client --------------------------------------------------------------

struct HttpClient::Impl {
  Impl(Url u, ClientOptions o) : url(std::move(u)), opt(std::move(o)) {}

  Url url;
  ClientOptions opt;
  asio::io_context ioc;
  std::optional<beast::tcp_stream> conn;
  beast::flat_buffer buffer;
  int64_t opened = 0;
  std::optional<Clock::time_point> deadline;

  // Runs the io_context until the one pending operation completes.
  void run() {
    ioc.restart();
    ioc.run();
  }

  void drop() {
    if (conn) {
      beast::error_code ignored;
      conn->socket().shutdown(tcp::socket::shutdown_both, ignored);
      conn->socket().close(ignored);
      conn.reset();
    }
    buffer.clear();
  }

  // Arms the stream's timer for the next operation: `limit` from now, or the
  // exchange's deadline when sooner. False when the deadline has passed.
  bool arm(std::chrono::milliseconds limit) {
    std::optional<Clock::time_point> at;
    if (limit.count() > 0) at = Clock::now() + limit;
    if (deadline && (!at || *deadline < *at)) at = deadline;
    if (at && *at <= Clock::now()) return false;
    if (at) {
      conn->expires_at(*at);
    } else {
      conn->expires_never();
    }
    return true;
  }

  Status failure(const beast::error_code& ec, const char* doing) const {
    if (ec == beast::error::timeout) {
      return Status::io_error(std::string("timed out ") + doing + " " + url.to_string());
    }
    return Status::io_error(std::string("error ") + doing + " " + url.to_string() + ": " + ec.message());
  }

  Status timed_out(const char* doing) const {
    return Status::io_error(std::string("timed out ") + doing + " " + url.to_string());
  }

  Status connect() {
    drop();
    tcp::resolver resolver(ioc);
    beast::error_code ec;
    tcp::resolver::results_type endpoints;
    bool resolved = false;
    resolver.async_resolve(url.host, std::to_string(url.port),
                           [&](const beast::error_code& e, tcp::resolver::results_type r) {
                             ec = e;
                             endpoints = std::move(r);
                             resolved = true;
                           });
    ioc.restart();
    if (opt.connect_timeout.count() > 0) {
      ioc.run_for(opt.connect_timeout);
      if (!resolved) {
        resolver.cancel();
        run();
        return Status::io_error("timed out resolving " + url.host);
      }
    } else {
      ioc.run();
    }
    if (ec) return Status::io_error("cannot resolve " + url.host + ": " + ec.message());

    conn.emplace(ioc);
    if (!arm(opt.connect_timeout)) return timed_out("connecting to");
    conn->async_connect(endpoints, [&](const beast::error_code& e, const tcp::endpoint&) { ec = e; });
    run();
    if (ec) {
      conn.reset();
      if (ec == beast::error::timeout) return timed_out("connecting to");
      // Refused: nothing listens there (yet). Its own code, so a caller can
      // wait for a server that is still starting (the admin CLI's --wait).
      if (ec == asio::error::connection_refused) {
        return Status::unavailable("cannot connect to " + url.to_string() + ": " + ec.message());
      }
      return Status::io_error("cannot connect to " + url.to_string() + ": " + ec.message());
    }
    conn->socket().set_option(tcp::no_delay(true), ec);
    ++opened;
    return Status::ok();
  }

  beast::error_code write(http::request<http::string_body>& req) {
    beast::error_code ec;
    if (!arm(opt.read_timeout)) return beast::error::timeout;
    http::async_write(*conn, req, [&](const beast::error_code& e, size_t) { ec = e; });
    run();
    return ec;
  }

  template <class Parser>
  beast::error_code read_header(Parser& parser) {
    beast::error_code ec;
    if (!arm(opt.read_timeout)) return beast::error::timeout;
    http::async_read_header(*conn, buffer, parser, [&](const beast::error_code& e, size_t) { ec = e; });
    run();
    return ec;
  }

  // Sends the request and reads the response header into `parser`, on the
  // kept-alive connection when there is one; a connection the server closed
  // while idle is replaced once.
  template <class Parser>
  Status send(http::request<http::string_body>& req, std::optional<Parser>& parser) {
    for (int attempt = 0;; ++attempt) {
      const bool reused = conn.has_value() && conn->socket().is_open();
      if (!reused) LG_RETURN_IF_ERROR(connect());
      parser.emplace();
      parser->body_limit(opt.max_body_bytes);
      if (req.method() == http::verb::head) parser->skip(true);  // a HEAD answer has no body
      beast::error_code ec = write(req);
      if (!ec) ec = read_header(*parser);
      if (!ec) return Status::ok();
      const bool retry = reused && attempt == 0 && stale_connection_error(ec) && parser->got_some() == false;
      drop();
      if (retry) continue;
      return failure(ec, "waiting for a response from");
    }
  }

  Result<http::request<http::string_body>> make_request(std::string_view method, std::string_view target,
                                                        std::string_view body, const Headers& headers) {
    const http::verb verb = http::string_to_verb(method);
    if (verb == http::verb::unknown) return Status::invalid_argument("unknown HTTP method '" + std::string(method) + "'");
    if (target.empty() || target.front() != '/') {
      return Status::invalid_argument("a request target must start with '/': '" + std::string(target) + "'");
    }
    http::request<http::string_body> req{verb, url.prefix + std::string(target), 11};
    req.set(http::field::host, url.host_header());
    req.set(http::field::user_agent, opt.user_agent);
    for (const auto& [k, v] : headers) req.set(k, v);
    if (!body.empty() && !has_header(headers, "content-type")) req.set(http::field::content_type, "application/json");
    req.keep_alive(true);
    req.body() = std::string(body);
    req.prepare_payload();
    return req;
  }

  void start_exchange() {
    deadline.reset();
    if (opt.total_timeout.count() > 0) deadline = Clock::now() + opt.total_timeout;
  }

  template <class Body, class Allocator>
  static void copy_headers(const http::response<Body, http::basic_fields<Allocator>>& res, HttpResult* out) {
    out->status = static_cast<int>(res.result_int());
    for (const auto& f : res) out->headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  }
};

HttpClient::HttpClient(Url url, ClientOptions options)
    : impl_(std::make_unique<Impl>(std::move(url), std::move(options))) {}
HttpClient::~HttpClient() = default;
HttpClient::HttpClient(HttpClient&&) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&&) noexcept = default;

Result<HttpClient> HttpClient::create(std::string_view base_url, ClientOptions options) {
  LG_ASSIGN_OR_RETURN(Url url, parse_url(base_url));
  return HttpClient(std::move(url), std::move(options));
}

const Url& HttpClient::url() const { return impl_->url; }
const ClientOptions& HttpClient::options() const { return impl_->opt; }
void HttpClient::close() { impl_->drop(); }
int64_t HttpClient::connections_opened() const { return impl_->opened; }

Result<HttpResult> HttpClient::request(std::string_view method, std::string_view target, std::string_view body,
                                       const Headers& headers) {
  Impl& d = *impl_;
  try {
    LG_ASSIGN_OR_RETURN(auto req, d.make_request(method, target, body, headers));
    d.start_exchange();
    std::optional<http::response_parser<http::string_body>> parser;
    LG_RETURN_IF_ERROR(d.send(req, parser));
    beast::error_code ec;
    if (!parser->is_done()) {
      if (!d.arm(d.opt.read_timeout)) {
        d.drop();
        return d.timed_out("reading the response from");
      }
      http::async_read(*d.conn, d.buffer, *parser, [&](const beast::error_code& e, size_t) { ec = e; });
      d.run();
    }
    if (ec) {
      d.drop();
      return d.failure(ec, "reading the response from");
    }
    HttpResult out;
    http::response<http::string_body> res = parser->release();
    Impl::copy_headers(res, &out);
    out.body = std::move(res.body());
    if (!res.keep_alive()) d.drop();
    return out;
  } catch (const std::exception& e) {
    d.drop();
    return Status::internal(std::string("HTTP client: ") + e.what());
  }
}

Result<HttpResult> HttpClient::stream(std::string_view method, std::string_view target, std::string_view body,
                                      const Headers& headers, const SseCallback& on_event) {
  Impl& d = *impl_;
  try {
    Headers all = headers;
    if (!has_header(all, "accept")) all.emplace_back("Accept", "text/event-stream");
    LG_ASSIGN_OR_RETURN(auto req, d.make_request(method, target, body, all));
    d.start_exchange();
    std::optional<http::response_parser<http::buffer_body>> parser;
    LG_RETURN_IF_ERROR(d.send(req, parser));

    HttpResult out;
    Impl::copy_headers(parser->get(), &out);
    const bool sse = out.ok() && lower(out.header("content-type")).rfind("text/event-stream", 0) == 0;
    SseParser events;
    char buf[16384];
    bool stopped = false;
    while (!parser->is_done()) {
      parser->get().body().data = buf;
      parser->get().body().size = sizeof(buf);
      if (!d.arm(d.opt.read_timeout)) {
        d.drop();
        return d.timed_out("reading the response from");
      }
      beast::error_code ec;
      http::async_read_some(*d.conn, d.buffer, *parser, [&](const beast::error_code& e, size_t) { ec = e; });
      d.run();
      if (ec == http::error::need_buffer) ec = {};
      if (ec) {
        d.drop();
        return d.failure(ec, "reading the response from");
      }
      const size_t got = sizeof(buf) - parser->get().body().size;
      if (got == 0) continue;
      if (sse) {
        if (!events.feed(std::string_view(buf, got), on_event)) {
          stopped = true;
          break;
        }
      } else {
        if (out.body.size() + got > d.opt.max_body_bytes) {
          d.drop();
          return Status::resource_exhausted("response body from " + d.url.to_string() + " exceeds " +
                                            std::to_string(d.opt.max_body_bytes) + " bytes");
        }
        out.body.append(buf, got);
      }
    }
    if (stopped || !parser->keep_alive()) d.drop();
    return out;
  } catch (const std::exception& e) {
    d.drop();
    return Status::internal(std::string("HTTP client: ") + e.what());
  }
}

// --- errors ------------------------------------------------------------------

std::string error_message(const HttpResult& result) {
  const nlohmann::json j = nlohmann::json::parse(result.body, nullptr, false);
  if (j.is_object()) {
    if (auto it = j.find("error"); it != j.end()) {
      if (it->is_object()) {
        if (auto m = it->find("message"); m != it->end() && m->is_string()) return m->get<std::string>();
      } else if (it->is_string()) {
        return it->get<std::string>();
      }
    }
    if (auto m = j.find("message"); m != j.end() && m->is_string()) return m->get<std::string>();
    if (auto m = j.find("detail"); m != j.end() && m->is_string()) return m->get<std::string>();
  }
  std::string_view body = trim(result.body);
  if (!body.empty()) {
    if (body.size() > 300) return std::string(body.substr(0, 300)) + "...";
    return std::string(body);
  }
  const auto reason = http::obsolete_reason(http::int_to_status(static_cast<unsigned>(result.status)));
  return std::string(reason);
}

Status status_from_http(const HttpResult& result) {
  if (result.ok()) return Status::ok();
  const std::string message = std::to_string(result.status) + ": " + error_message(result);
  switch (result.status) {
    case 404:
      return Status::not_found(message);
    case 429:
    case 503:
      return Status::resource_exhausted(message);
    case 501:
      return Status::unsupported(message);
    case 507:
      return Status::insufficient_memory(message);
    default:
      break;
  }
  if (result.status >= 400 && result.status < 500) return Status::invalid_argument(message);
  return Status::internal(message);
}

}  // namespace loragate::client
