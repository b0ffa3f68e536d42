// A tiny synchronous HTTP client over Boost.Beast for the gateway tests: one
// call per connection, or a held connection for streams, raw bytes and
// disconnects. Errors come back as values, never as exceptions.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

namespace loragate::testing {

namespace http = boost::beast::http;

struct ClientResponse {
  int status = 0;              // 0 when the exchange failed
  std::string error;           // why it failed
  std::string body;
  std::map<std::string, std::string> headers;
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

// A connection to 127.0.0.1:port.
class TestConnection {
 public:
  explicit TestConnection(uint16_t port);
  bool connected() const { return connected_; }
  const std::string& connect_error() const { return connect_error_; }

  // Sends a request and reads the whole response (keep-alive).
  ClientResponse call(http::verb method, const std::string& target, const std::string& body = "",
                      const std::map<std::string, std::string>& headers = {});
  // Sends a request and reads only the response header.
  ClientResponse send_and_read_header(http::verb method, const std::string& target, const std::string& body,
                                      const std::map<std::string, std::string>& headers = {});
  // After send_and_read_header: reads until `marker` is in the body read so far
  // (or the body ends); returns the body so far.
  std::string read_body_until(const std::string& marker);
  // Writes raw bytes.
  bool write_raw(const std::string& bytes);
  // Reads until the server closes the connection or `timeout`; returns what
  // was read and whether it was closed.
  std::pair<std::string, bool> read_until_closed(std::chrono::milliseconds timeout);
  void close();

 private:
  bool send(http::verb method, const std::string& target, const std::string& body,
            const std::map<std::string, std::string>& headers, std::string* error);

  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> parser_;
  bool connected_ = false;
  std::string connect_error_;
};

// One call on a fresh connection.
ClientResponse http_call(uint16_t port, http::verb method, const std::string& target, const std::string& body = "",
                         const std::map<std::string, std::string>& headers = {});
inline ClientResponse post_json(uint16_t port, const std::string& target, const nlohmann::json& body,
                                const std::map<std::string, std::string>& headers = {}) {
  return http_call(port, http::verb::post, target, body.dump(), headers);
}

// The `data:` payloads of a server-sent-event body, in order ("[DONE]" included).
std::vector<std::string> sse_events(const std::string& body);

}  // namespace loragate::testing
