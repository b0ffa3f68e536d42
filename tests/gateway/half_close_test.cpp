// A client that shuts its sending side (shutdown(SHUT_WR)) once its request
// is complete still reads: it gets its whole answer, then the server closes.
// (An HTTP/1.1 client may first get an interim "100 Continue", which the
// server uses to tell it from a client that closed.)
#include "tests/gateway/gateway_fixture.h"
#include "tests/gateway/raw_client.h"

namespace loragate::testing {
namespace {

using nlohmann::json;

// The final response's body, after any 1xx interim responses.
std::string final_body(const std::string& data, const std::string& status_line) {
  const size_t start = data.find(status_line);
  if (start == std::string::npos) return "";
  const size_t body = data.find("\r\n\r\n", start);
  return body == std::string::npos ? "" : data.substr(body + 4);
}

std::string half_closed_exchange(uint16_t port, const std::string& request, bool* closed) {
  RawClient c(port);
  EXPECT_TRUE(c.connected());
  EXPECT_TRUE(c.send_all(request));
  c.shut_write();
  return c.read_until_closed(std::chrono::seconds(10), closed);
}

TEST_F(GatewayTest, HalfClosedClientGetsItsWholeResponse) {
  bool closed = false;
  const std::string got = half_closed_exchange(port_, json_post("/v1/completions", greedy("a").dump()), &closed);
  EXPECT_TRUE(closed);
  const std::string body = final_body(got, "HTTP/1.1 200");
  ASSERT_FALSE(body.empty()) << got;
  EXPECT_EQ(json::parse(body, nullptr, false)["choices"][0]["text"], golden_text("a")) << got;
  EXPECT_TRUE(engine_drained(std::chrono::seconds(1)));
}

TEST_F(GatewayTest, HalfClosedClientGetsItsWholeStream) {
  json body = greedy("b");
  body["stream"] = true;
  bool closed = false;
  const std::string got = half_closed_exchange(port_, json_post("/v1/completions", body.dump()), &closed);
  EXPECT_TRUE(closed);
  EXPECT_NE(got.find("HTTP/1.1 200"), std::string::npos) << got;
  EXPECT_NE(got.find("data: [DONE]"), std::string::npos) << got;
  EXPECT_NE(got.find("\"finish_reason\":\"length\""), std::string::npos) << got;
}

TEST_F(GatewayTest, HalfClosedHttp10ClientIsAnsweredWithoutInterimResponses) {
  const std::string body = greedy(kServed).dump();
  bool closed = false;
  const std::string got = half_closed_exchange(
      port_,
      "POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body,
      &closed);
  EXPECT_TRUE(closed);
  ASSERT_EQ(got.rfind("HTTP/1.0 200", 0), 0u) << got;  // no 1xx for HTTP/1.0
  EXPECT_EQ(json::parse(final_body(got, "HTTP/1.0 200"), nullptr, false)["choices"][0]["text"], golden_text("base"));
}

TEST_F(GatewayTest, HalfClosedClientGetsQuickAnswersToo) {
  bool closed = false;
  const std::string got =
      half_closed_exchange(port_, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
  EXPECT_TRUE(closed);
  EXPECT_NE(got.find("{\"status\":\"ok\"}"), std::string::npos) << got;
}

}  // namespace
}  // namespace loragate::testing
