#include "client/http_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/client/tiny_server.h"

namespace loragate::client {
namespace {

using loragate::testing::TinyServer;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// The routes the client tests talk to.
bool handle(const testing::tiny::Request& req, testing::tiny::tcp::socket& s) {
  const std::string target(req.target());
  if (target.rfind("/json", 0) == 0 || target.rfind("/pre/json", 0) == 0) {
    json echo = {{"hello", "world"},
                 {"method", std::string(req.method_string())},
                 {"target", target},
                 {"body", req.body()},
                 {"auth", std::string(req[testing::tiny::http::field::authorization])},
                 {"content_type", std::string(req[testing::tiny::http::field::content_type])},
                 {"host", std::string(req[testing::tiny::http::field::host])}};
    TinyServer::respond(s, 200, echo.dump());
    return true;
  }
  if (target == "/missing") {
    TinyServer::respond(s, 404,
                        R"({"error":{"message":"adapter 'x' is not registered","type":"not_found_error",)"
                        R"("param":"name","code":"adapter_not_found"}})");
    return true;
  }
  if (target == "/bad") {
    TinyServer::respond(s, 400, R"({"error":{"message":"prompt is required","type":"invalid_request_error"}})");
    return true;
  }
  if (target == "/plain") {
    TinyServer::respond(s, 502, "  bad gateway upstream\n", "text/plain");
    return true;
  }
  if (target == "/empty503") {
    TinyServer::respond(s, 503, "", "text/plain");
    return true;
  }
  if (target == "/close") {
    TinyServer::respond(s, 200, R"({"closing":true})", "application/json", /*close=*/true);
    return false;
  }
  if (target == "/drop") {  // keep-alive promised, then the connection is closed anyway
    TinyServer::respond(s, 200, R"({"dropped":true})");
    return false;
  }
  if (target == "/big") {
    TinyServer::respond(s, 200, std::string(100000, 'x'), "text/plain");
    return true;
  }
  if (target == "/sse") {
    // Events cut across chunk boundaries, CRLF split between chunks, a
    // comment, a named event, multi-line data, and a tail without a blank line.
    TinyServer::write_raw(s, TinyServer::sse_head());
    const std::vector<std::string> pieces = {
        "data: {\"i\":1}\n",  "\n",          "da",  "ta: two\r",          "\n\r\n", ": keep-alive comment\n\n",
        "event: usage\ndata: line1\ndata:line2\n\n", "data: [DO", "NE]\n", "\n",     "data: never ended"};
    for (const auto& p : pieces) {
      TinyServer::write_raw(s, TinyServer::chunk(p));
      std::this_thread::sleep_for(5ms);
    }
    TinyServer::write_raw(s, TinyServer::chunk(""));
    return true;
  }
  if (target == "/sse-slow") {
    TinyServer::write_raw(s, TinyServer::sse_head());
    TinyServer::write_raw(s, TinyServer::chunk("data: first\n\n"));
    std::this_thread::sleep_for(400ms);
    TinyServer::write_raw(s, TinyServer::chunk("data: second\n\n"));
    TinyServer::write_raw(s, TinyServer::chunk("data: [DONE]\n\n"));
    TinyServer::write_raw(s, TinyServer::chunk(""));
    return true;
  }
  if (target == "/trickle") {  // an event every 50 ms for 3 s
    TinyServer::write_raw(s, TinyServer::sse_head());
    for (int i = 0; i < 60; ++i) {
      if (!TinyServer::write_raw(s, TinyServer::chunk("data: " + std::to_string(i) + "\n\n"))) return false;
      std::this_thread::sleep_for(50ms);
    }
    TinyServer::write_raw(s, TinyServer::chunk(""));
    return false;
  }
  if (target == "/hang") {  // reads the request, never answers
    return false;
  }
  TinyServer::respond(s, 404, R"({"error":{"message":"no route"}})");
  return true;
}

// /hang must hold the connection open without answering: a handler that
// sleeps until the server stops.
struct Fixture : ::testing::Test {
  Fixture()
      : server([this](const testing::tiny::Request& req, testing::tiny::tcp::socket& s) {
          if (req.target() == "/hang") {
            server.wait_stop(10s);
            return false;
          }
          return handle(req, s);
        }) {}
  HttpClient make(ClientOptions o = {}) {
    auto c = HttpClient::create(server.url(), o);
    EXPECT_TRUE(c.is_ok()) << c.status().to_string();
    return std::move(c).value();
  }
  TinyServer server;
};

// --- URLs ---

TEST(UrlTest, ParsesHostPortAndPrefix) {
  auto u = parse_url("http://127.0.0.1:8000");
  ASSERT_TRUE(u.is_ok()) << u.status().to_string();
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8000);
  EXPECT_EQ(u->prefix, "");
  EXPECT_EQ(u->to_string(), "http://127.0.0.1:8000");

  u = parse_url("  HTTP://example.com/  ");
  ASSERT_TRUE(u.is_ok());
  EXPECT_EQ(u->host, "example.com");
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->prefix, "");

  u = parse_url("localhost:9000/api/v2/");
  ASSERT_TRUE(u.is_ok());
  EXPECT_EQ(u->host, "localhost");
  EXPECT_EQ(u->port, 9000);
  EXPECT_EQ(u->prefix, "/api/v2");

  u = parse_url("http://[::1]:8080");
  ASSERT_TRUE(u.is_ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->host_header(), "[::1]:8080");
}

TEST(UrlTest, RefusesBadUrlsClearly) {
  auto https = parse_url("https://api.example.com");
  ASSERT_FALSE(https.is_ok());
  EXPECT_EQ(https.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(https.status().message().find("https is not supported"), std::string::npos);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "empty URL"},
      {"ftp://host:21", "unsupported URL scheme 'ftp'"},
      {"http://", "no host"},
      {"http://:8000", "no host"},
      {"http://h:0", "out of range"},
      {"http://h:99999", "out of range"},
      {"http://h:123456", "bad port"},
      {"http://h:70000", "out of range"},
      {"http://h:8o", "bad port"},
      {"http://h:", "bad port"},
      {"http://::1:80", "need brackets"},
      {"http://[::1", "unclosed"},
      {"http://user:pw@h:80", "user info"},
      {"http://h:80/x?y=1", "no query"},
  };
  for (const auto& [text, why] : bad) {
    auto u = parse_url(text);
    ASSERT_FALSE(u.is_ok()) << text;
    EXPECT_EQ(u.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(u.status().message().find(why), std::string::npos) << text << " -> " << u.status().message();
  }
  EXPECT_FALSE(HttpClient::create("https://x").is_ok());
}

TEST(UrlTest, EncodesPathSegments) {
  EXPECT_EQ(url_encode_segment("sql-lora_v1.2~x"), "sql-lora_v1.2~x");
  EXPECT_EQ(url_encode_segment("a b/c?d%"), "a%20b%2Fc%3Fd%25");
}

// --- SSE parsing ---

std::vector<std::string> parse_all(const std::vector<std::string>& pieces, std::vector<std::string>* names = nullptr) {
  SseParser p;
  std::vector<std::string> out;
  for (const auto& piece : pieces) {
    p.feed(piece, [&](const SseEvent& e) {
      out.push_back(e.data);
      if (names) names->push_back(e.event);
      return true;
    });
  }
  return out;
}

TEST(SseParserTest, SameEventsWhicheverWayTheBytesAreCut) {
  const std::string stream =
      "data: {\"a\":1}\n\n"
      ": comment\r\n\r\n"
      "event: usage\r\ndata: x\r\ndata:y\r\n\r\n"
      "id: 7\rdata: cr only\r\r"
      "data\n\n"
      "retry: 10\ndata: [DONE]\n\n"
      "data: unterminated";
  const std::vector<std::string> expected = {"{\"a\":1}", "x\ny", "cr only", "", "[DONE]"};
  std::vector<std::string> names;
  EXPECT_EQ(parse_all({stream}, &names), expected);
  EXPECT_EQ(names, (std::vector<std::string>{"", "usage", "", "", ""}));
  std::vector<std::string> bytes;
  for (char c : stream) bytes.emplace_back(1, c);
  EXPECT_EQ(parse_all(bytes), expected);
  for (size_t cut = 1; cut < stream.size(); ++cut) {
    EXPECT_EQ(parse_all({stream.substr(0, cut), stream.substr(cut)}), expected) << "cut at " << cut;
  }
}

TEST(SseParserTest, StopsWhenTheCallbackSaysSo) {
  SseParser p;
  int seen = 0;
  EXPECT_FALSE(p.feed("data: 1\n\ndata: 2\n\n", [&](const SseEvent&) { return ++seen < 1; }));
  EXPECT_EQ(seen, 1);
}

// --- exchanges ---

TEST_F(Fixture, RequestAndResponse) {
  HttpClient c = make();
  auto r = c.request("GET", "/json");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(r->ok());
  EXPECT_EQ(r->header("CONTENT-TYPE"), "application/json");
  json j = json::parse(r->body);
  EXPECT_EQ(j["hello"], "world");
  EXPECT_EQ(j["method"], "GET");
  EXPECT_EQ(j["host"], "127.0.0.1:" + std::to_string(server.port()));

  r = c.request("POST", "/json", R"({"name":"a"})", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  j = json::parse(r->body);
  EXPECT_EQ(j["method"], "POST");
  EXPECT_EQ(j["body"], R"({"name":"a"})");
  EXPECT_EQ(j["auth"], "Bearer s3cret");
  EXPECT_EQ(j["content_type"], "application/json");

  r = c.request("DELETE", "/json/a%20b");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(json::parse(r->body)["target"], "/json/a%20b");
}

TEST_F(Fixture, PrefixIsPrependedToTargets) {
  auto c = HttpClient::create(server.url() + "/pre/");
  ASSERT_TRUE(c.is_ok());
  auto r = c->request("GET", "/json");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(json::parse(r->body)["target"], "/pre/json");
}

TEST_F(Fixture, KeepAliveReusesOneConnection) {
  HttpClient c = make();
  for (int i = 0; i < 5; ++i) {
    auto r = c.request("GET", "/json");
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    ASSERT_EQ(r->status, 200);
  }
  auto s = c.stream("GET", "/sse-slow", "", {}, [](const SseEvent&) { return true; });
  ASSERT_TRUE(s.is_ok());
  EXPECT_TRUE(c.request("GET", "/missing").is_ok());
  EXPECT_EQ(c.connections_opened(), 1);
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(server.requests(), 7);
}

TEST_F(Fixture, ReconnectsAfterConnectionClose) {
  HttpClient c = make();
  auto r = c.request("GET", "/close");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->header("connection"), "close");
  r = c.request("GET", "/json");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(c.connections_opened(), 2);
}

TEST_F(Fixture, RetriesOnceWhenTheServerDroppedAnIdleConnection) {
  HttpClient c = make();
  ASSERT_TRUE(c.request("GET", "/drop").is_ok());
  std::this_thread::sleep_for(50ms);  // the server has closed its end by now
  auto r = c.request("POST", "/json", "{}");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(c.connections_opened(), 2);
}

TEST_F(Fixture, ErrorStatusesMapToMessagesAndCodes) {
  HttpClient c = make();
  auto r = c.request("DELETE", "/missing");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();  // an HTTP error is still an exchange
  EXPECT_EQ(r->status, 404);
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(error_message(*r), "adapter 'x' is not registered");
  Status s = status_from_http(*r);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "404: adapter 'x' is not registered");

  r = c.request("GET", "/bad");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(status_from_http(*r).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status_from_http(*r).message(), "400: prompt is required");

  r = c.request("GET", "/plain");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(status_from_http(*r).code(), StatusCode::kInternal);
  EXPECT_EQ(status_from_http(*r).message(), "502: bad gateway upstream");

  r = c.request("GET", "/empty503");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(status_from_http(*r).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(status_from_http(*r).message(), "503: Service Unavailable");

  HttpResult ok;
  ok.status = 201;
  EXPECT_TRUE(status_from_http(ok).is_ok());
  EXPECT_EQ(c.connections_opened(), 1);  // error responses keep the connection
}

TEST_F(Fixture, RejectsBadMethodsAndTargets) {
  HttpClient c = make();
  EXPECT_EQ(c.request("FETCH", "/json").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.request("GET", "json").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(Fixture, BodyLimit) {
  ClientOptions o;
  o.max_body_bytes = 1000;
  HttpClient c = make(o);
  auto r = c.request("GET", "/big");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_TRUE(c.request("GET", "/json").is_ok());
}

TEST(ClientTest, ConnectionRefused) {
  uint16_t port;
  {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::acceptor a(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
    port = a.local_endpoint().port();
  }
  auto c = HttpClient::create("http://127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(c.is_ok());
  auto r = c->request("GET", "/");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);  // refused: what the admin CLI's --wait retries
  EXPECT_NE(r.status().message().find("cannot connect to http://127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << r.status().message();
}

TEST_F(Fixture, ReadTimeoutThenRecovers) {
  ClientOptions o;
  o.read_timeout = 200ms;
  HttpClient c = make(o);
  const auto t = Clock::now();
  auto r = c.request("GET", "/hang");
  const double ms = ms_since(t);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_NE(r.status().message().find("timed out"), std::string::npos) << r.status().message();
  EXPECT_GE(ms, 150);
  EXPECT_LT(ms, 3000);
  auto ok = c.request("GET", "/json");
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok->status, 200);
}

TEST_F(Fixture, TotalTimeoutCutsALiveStream) {
  ClientOptions o;
  o.read_timeout = 1000ms;  // each event arrives well within this
  o.total_timeout = 300ms;
  HttpClient c = make(o);
  int events = 0;
  const auto t = Clock::now();
  auto r = c.stream("GET", "/trickle", "", {}, [&](const SseEvent&) { return ++events > 0; });
  const double ms = ms_since(t);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("timed out"), std::string::npos) << r.status().message();
  EXPECT_GE(events, 2);
  EXPECT_GE(ms, 250);
  EXPECT_LT(ms, 2000);
}

TEST_F(Fixture, StreamsEventsSplitAcrossChunks) {
  HttpClient c = make();
  std::vector<std::string> data, names;
  auto r = c.stream("POST", "/sse", "{}", {}, [&](const SseEvent& e) {
    data.push_back(e.data);
    names.push_back(e.event);
    return true;
  });
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(r->body.empty());
  EXPECT_EQ(data, (std::vector<std::string>{"{\"i\":1}", "two", "line1\nline2", "[DONE]"}));
  EXPECT_EQ(names, (std::vector<std::string>{"", "", "usage", ""}));
  // The connection survives a finished chunked stream.
  EXPECT_TRUE(c.request("GET", "/json").is_ok());
  EXPECT_EQ(c.connections_opened(), 1);
}

TEST_F(Fixture, EventsArriveAsTheyAreSent) {
  HttpClient c = make();
  std::vector<double> at;
  const auto t = Clock::now();
  auto r = c.stream("POST", "/sse-slow", "{}", {}, [&](const SseEvent&) {
    at.push_back(ms_since(t));
    return true;
  });
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(at.size(), 3u);
  EXPECT_LT(at[0], 250);  // not held back until the body ends
  EXPECT_GE(at[1] - at[0], 300);
}

TEST_F(Fixture, CallbackCanStopAStream) {
  HttpClient c = make();
  int events = 0;
  const auto t = Clock::now();
  auto r = c.stream("GET", "/trickle", "", {}, [&](const SseEvent&) { return ++events < 2; });
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(events, 2);
  EXPECT_LT(ms_since(t), 1500);
  auto ok = c.request("GET", "/json");
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(c.connections_opened(), 2);
}

TEST_F(Fixture, StreamOfAnErrorStatusReadsTheBody) {
  HttpClient c = make();
  int events = 0;
  auto r = c.stream("POST", "/missing", "{}", {}, [&](const SseEvent&) { return ++events > 0; });
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(events, 0);
  EXPECT_EQ(status_from_http(*r).message(), "404: adapter 'x' is not registered");
}

}  // namespace
}  // namespace loragate::client
