#include "tests/gateway/http_test_client.h"

#include <poll.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>

namespace loragate::testing {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;

TestConnection::TestConnection(uint16_t port) : socket_(ioc_) {
  beast::error_code ec;
  socket_.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  connected_ = !ec;
  if (ec) connect_error_ = ec.message();
}

bool TestConnection::send(http::verb method, const std::string& target, const std::string& body,
                          const std::map<std::string, std::string>& headers, std::string* error) {
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::user_agent, "loragate-test");
  if (!body.empty() || method == http::verb::post) req.set(http::field::content_type, "application/json");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  beast::error_code ec;
  http::write(socket_, req, ec);
  if (ec) *error = "write: " + ec.message();
  return !ec;
}

static void fill(const http::response<http::string_body>& res, ClientResponse* out) {
  out->status = res.result_int();
  out->body = res.body();
  for (const auto& f : res) out->headers[std::string(f.name_string())] = std::string(f.value());
}

ClientResponse TestConnection::call(http::verb method, const std::string& target, const std::string& body,
                                    const std::map<std::string, std::string>& headers) {
  ClientResponse out;
  if (!connected_) {
    out.error = "connect: " + connect_error_;
    return out;
  }
  std::string write_error;
  const bool sent = send(method, target, body, headers, &write_error);
  // Even when the write failed (the server answered early and stopped
  // reading), the answer may be waiting.
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  beast::error_code ec;
  http::read(socket_, buffer_, parser, ec);
  if (ec) {
    out.error = (sent ? "" : write_error + "; ") + "read: " + ec.message();
    return out;
  }
  fill(parser.get(), &out);
  return out;
}

ClientResponse TestConnection::send_and_read_header(http::verb method, const std::string& target,
                                                    const std::string& body,
                                                    const std::map<std::string, std::string>& headers) {
  ClientResponse out;
  if (!connected_ || !send(method, target, body, headers, &out.error)) return out;
  parser_.emplace();
  parser_->body_limit(64u << 20);
  beast::error_code ec;
  http::read_header(socket_, buffer_, *parser_, ec);
  if (ec) {
    out.error = "read header: " + ec.message();
    return out;
  }
  out.status = parser_->get().result_int();
  for (const auto& f : parser_->get()) out.headers[std::string(f.name_string())] = std::string(f.value());
  return out;
}

std::string TestConnection::read_body_until(const std::string& marker) {
  while (parser_ && !parser_->is_done() && parser_->get().body().find(marker) == std::string::npos) {
    beast::error_code ec;
    http::read_some(socket_, buffer_, *parser_, ec);
    if (ec) break;
  }
  return parser_ ? parser_->get().body() : std::string();
}

bool TestConnection::write_raw(const std::string& bytes) {
  beast::error_code ec;
  net::write(socket_, net::buffer(bytes), ec);
  return !ec;
}

std::pair<std::string, bool> TestConnection::read_until_closed(std::chrono::milliseconds timeout) {
  std::string data;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return {data, false};
    pollfd pfd{socket_.native_handle(), POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    beast::error_code ec;
    const size_t n = socket_.read_some(net::buffer(buf), ec);
    if (ec) return {data, true};  // EOF or reset: closed by the server
    data.append(buf, n);
  }
}

void TestConnection::close() {
  beast::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
}

ClientResponse http_call(uint16_t port, http::verb method, const std::string& target, const std::string& body,
                         const std::map<std::string, std::string>& headers) {
  TestConnection conn(port);
  return conn.call(method, target, body, headers);
}

std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> events;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string event = body.substr(pos, end - pos);
    if (event.rfind("data: ", 0) == 0) events.push_back(event.substr(6));
    pos = end + 2;
  }
  return events;
}

}  // namespace loragate::testing
