// Request framing (RFC 9112 §6): only plain chunked is accepted as a transfer
// coding, never beside Content-Length; a refusal is an OpenAI-shaped error,
// and the connection is closed after it. Checked on the header alone, then
// over raw sockets.
#include "gateway/http/request_framing.h"
#include "tests/gateway/gateway_fixture.h"
#include "tests/gateway/raw_client.h"

namespace loragate::testing {
namespace {

using nlohmann::json;

using Fields = std::vector<std::pair<std::string, std::string>>;

HttpRequest header_with(const Fields& fields, unsigned version = 11) {
  HttpRequest req{http::verb::post, "/v1/completions", version};
  for (const auto& [name, value] : fields) req.insert(name, value);
  return req;
}

TEST(RequestFramingTest, OnlyPlainChunkedWithoutContentLength) {
  EXPECT_FALSE(check_request_framing(header_with({})));
  EXPECT_FALSE(check_request_framing(header_with({{"Content-Length", "5"}})));
  EXPECT_FALSE(check_request_framing(header_with({{"Transfer-Encoding", "chunked"}})));
  EXPECT_FALSE(check_request_framing(header_with({{"Transfer-Encoding", " Chunked "}})));

  struct Case {
    Fields fields;
    http::status status;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {{{"Transfer-Encoding", "xchunked"}, {"Content-Length", "5"}}, http::status::bad_request, "Content-Length"},
      {{{"Transfer-Encoding", "chunked"}, {"Content-Length", "5"}}, http::status::bad_request, "Content-Length"},
      {{{"Transfer-Encoding", "xchunked"}}, http::status::bad_request, "must end with chunked, got 'xchunked'"},
      {{{"Transfer-Encoding", "chunked, gzip"}}, http::status::bad_request, "must end with chunked"},
      {{{"Transfer-Encoding", ""}}, http::status::bad_request, "must end with chunked"},
      {{{"Transfer-Encoding", "chunked, chunked"}}, http::status::bad_request, "more than once"},
      {{{"Transfer-Encoding", "gzip, chunked"}}, http::status::not_implemented, "'gzip' is not supported"},
      // Two lines are one list: gzip, chunked.
      {{{"Transfer-Encoding", "gzip"}, {"Transfer-Encoding", "chunked"}}, http::status::not_implemented, "gzip"},
  };
  for (const Case& c : cases) {
    std::optional<ApiError> e = check_request_framing(header_with(c.fields));
    ASSERT_TRUE(e) << c.needle;
    EXPECT_EQ(e->status, c.status) << c.needle;
    EXPECT_NE(e->message.find(c.needle), std::string::npos) << e->message;
  }
  std::optional<ApiError> old = check_request_framing(header_with({{"Transfer-Encoding", "chunked"}}, 10));
  ASSERT_TRUE(old);
  EXPECT_EQ(old->status, http::status::bad_request);
}

// Sends `request`, reads until the server closes; returns what came.
std::string exchange_raw(uint16_t port, const std::string& request, bool* closed) {
  RawClient c(port);
  EXPECT_TRUE(c.connected());
  EXPECT_TRUE(c.send_all(request));
  return c.read_until_closed(std::chrono::seconds(5), closed);
}

json error_of(const std::string& response) {
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? json() : json::parse(response.substr(body + 4), nullptr, false);
}

TEST_F(GatewayTest, UnknownTransferCodingBesideContentLengthIs400AndCloses) {
  // Served by Content-Length and kept open before: a smuggling shape.
  const std::string body = greedy(kServed, 4).dump();
  bool closed = false;
  const std::string got = exchange_raw(
      port_,
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: xchunked\r\n"
      "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body,
      &closed);
  EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << got;
  EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
  EXPECT_TRUE(closed);
  const json e = error_of(got);
  EXPECT_EQ(e["error"]["type"], "invalid_request_error") << got;
  EXPECT_NE(e["error"]["message"].get<std::string>().find("Content-Length"), std::string::npos);
}

TEST_F(GatewayTest, TransferEncodingWithContentLengthIs400AndClosesInEitherOrder) {
  const std::string body = greedy(kServed, 4).dump();
  const std::string cl = "Content-Length: " + std::to_string(body.size()) + "\r\n";
  const std::string te = "Transfer-Encoding: chunked\r\n";
  for (const std::string& fields : {te + cl, cl + te}) {
    bool closed = false;
    const std::string got = exchange_raw(
        port_, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + fields + "\r\n" + body,
        &closed);
    EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << fields << got;
    EXPECT_TRUE(closed) << fields;
  }
}

std::string chunked(const std::string& body) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx", body.size());
  return std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n";
}

TEST_F(GatewayTest, CodingsOtherThanChunkedAre501AndClose) {
  // gzip came through still compressed before: the handler saw the raw bytes.
  bool closed = false;
  const std::string got = exchange_raw(port_,
                                       "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                       "Transfer-Encoding: gzip, chunked\r\n\r\n" +
                                           chunked("\x1f\x8b not really gzip"),
                                       &closed);
  EXPECT_EQ(got.rfind("HTTP/1.1 501", 0), 0u) << got;
  EXPECT_TRUE(closed);
  const json e = error_of(got);
  EXPECT_EQ(e["error"]["code"], "unsupported_transfer_encoding") << got;
  EXPECT_NE(e["error"]["message"].get<std::string>().find("gzip"), std::string::npos);
}

TEST_F(GatewayTest, PlainChunkedBodiesAreStillServedOnAKeptConnection) {
  RawClient c(port_);
  ASSERT_TRUE(c.connected());
  const std::string head =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  ASSERT_TRUE(c.send_all(head + chunked(greedy(kServed).dump())));
  const std::string first = c.read_until("\"text_completion\"", std::chrono::seconds(5));
  EXPECT_EQ(first.rfind("HTTP/1.1 200", 0), 0u) << first;
  // The same connection takes the next request.
  ASSERT_TRUE(c.send_all("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  bool closed = false;
  const std::string second = c.read_until_closed(std::chrono::seconds(5), &closed);
  EXPECT_NE((first + second).find("{\"status\":\"ok\"}"), std::string::npos) << first << second;
}

}  // namespace
}  // namespace loragate::testing
