// Connection lifecycle: slow clients are timed out, a client leaving
// mid-stream cancels its sequence, stop() is graceful, observers see every
// request, and routes can be added.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include "gateway/metrics/request_log.h"
#include "tests/gateway/gateway_fixture.h"

namespace loragate::testing {
namespace {

using nlohmann::json;
using Ms = std::chrono::milliseconds;

std::string raw_request(const std::string& method, const std::string& target, const std::string& body,
                        const std::string& connection = "keep-alive") {
  return method + " " + target + " HTTP/1.1\r\nHost: x\r\nConnection: " + connection +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST_F(GatewayTest, HalfSentHeadersAreClosedAfterTheReadTimeout) {
  TestConnection conn(port_);
  ASSERT_TRUE(conn.connected());
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(conn.write_raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: appl"));
  auto [data, closed] = conn.read_until_closed(std::chrono::seconds(5));
  const auto elapsed = std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - start);
  EXPECT_TRUE(closed);
  EXPECT_GE(elapsed.count(), 250);
  EXPECT_LT(elapsed.count(), 2000);

  // A connection that never sends a byte goes the same way.
  TestConnection silent(port_);
  auto [nothing, silent_closed] = silent.read_until_closed(std::chrono::seconds(5));
  EXPECT_TRUE(silent_closed);
  EXPECT_TRUE(nothing.empty());
}

TEST_F(GatewayTest, DisconnectMidStreamCancelsTheSequence) {
  LG_REQUIRE_STORIES260K();  // its speed
  ASSERT_TRUE(engine_drained(std::chrono::seconds(1)));
  const int64_t generated_before = loop_->stats().generated_tokens;
  json body = greedy("b", 480);
  body["ignore_eos"] = true;
  body["stream"] = true;
  TestConnection conn(port_);
  ClientResponse head = conn.send_and_read_header(http::verb::post, "/v1/completions", body.dump());
  ASSERT_EQ(head.status, 200) << head.error;
  const std::string first = conn.read_body_until("\"text\":\",");  // the first token's chunk
  ASSERT_NE(first.find("data: "), std::string::npos);
  conn.close();
  EXPECT_TRUE(engine_drained(std::chrono::seconds(1))) << "running " << loop_->stats().running << ", kv blocks "
                                                       << loop_->stats().kv_blocks_used;
  EXPECT_LT(loop_->stats().generated_tokens - generated_before, 480) << "the sequence ran to its end";
  // The server is fine afterwards.
  EXPECT_EQ(post("/v1/completions", greedy("b")).json()["choices"][0]["text"], golden_text("b"));
}

TEST_F(GatewayTest, DisconnectWhileWaitingForAWholeResponseCancelsToo) {
  LG_REQUIRE_STORIES260K();  // its speed
  ASSERT_TRUE(engine_drained(std::chrono::seconds(1)));
  const int64_t generated_before = loop_->stats().generated_tokens;
  json body = greedy(kServed, 480);
  body["ignore_eos"] = true;
  TestConnection conn(port_);
  ASSERT_TRUE(conn.write_raw(raw_request("POST", "/v1/completions", body.dump())));
  // Wait until it runs, then leave without reading.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (loop_->stats().running == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(Ms(1));
  conn.close();
  EXPECT_TRUE(engine_drained(std::chrono::seconds(1)));
  EXPECT_LT(loop_->stats().generated_tokens - generated_before, 480) << "the sequence ran to its end";
}

TEST_F(GatewayTest, PipelinedRequestsAreAnsweredInOrder) {
  TestConnection conn(port_);
  ASSERT_TRUE(conn.write_raw(raw_request("POST", "/v1/completions", greedy(kServed, 4).dump()) +
                             raw_request("GET", "/health", "") + raw_request("GET", "/nope", "", "close")));
  auto [data, closed] = conn.read_until_closed(std::chrono::seconds(3));
  EXPECT_TRUE(closed);
  const size_t first = data.find("text_completion");
  const size_t second = data.find("{\"status\":\"ok\"}");
  const size_t third = data.find("404 Not Found");
  ASSERT_NE(first, std::string::npos) << data;
  ASSERT_NE(second, std::string::npos) << data;
  ASSERT_NE(third, std::string::npos) << data;
  EXPECT_LT(first, second);
  EXPECT_LT(second, third);
}

TEST_F(GatewayTest, Http10StreamEndsWithTheConnection) {
  json body = greedy(kServed);
  body["stream"] = true;
  TestConnection conn(port_);
  ASSERT_TRUE(conn.write_raw("POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: " +
                             std::to_string(body.dump().size()) + "\r\n\r\n" + body.dump()));
  auto [data, closed] = conn.read_until_closed(std::chrono::seconds(3));
  EXPECT_TRUE(closed);
  ASSERT_EQ(data.rfind("HTTP/1.0 200", 0), 0u) << data;
  EXPECT_EQ(data.find("chunked"), std::string::npos);
  const std::string events_text = data.substr(data.find("\r\n\r\n") + 4);
  std::string text;
  for (const std::string& e : sse_events(events_text)) {
    if (e != "[DONE]") text += json::parse(e)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, golden_text("base"));
}

TEST_F(GatewayTest, CurlGetsTheGoldenTextAndStreams) {
  if (std::system("curl --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  const std::string dir = make_temp_dir("lg_gateway_curl");
  json body = greedy("a");
  body["padding"] = std::string(3000, 'p');  // large enough for curl to ask "Expect: 100-continue"
  {
    std::ofstream(dir + "/body.json") << body.dump();
  }
  auto run = [&](const std::string& extra) {
    const std::string cmd = "curl -sS --max-time 5 -H 'Content-Type: application/json' -H 'Expect: 100-continue' " +
                            extra + " --data-binary @" + dir + "/body.json http://127.0.0.1:" +
                            std::to_string(port_) + "/v1/completions";
    std::string out;
    FILE* pipe = popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
    pclose(pipe);
    return out;
  };
  const auto start = std::chrono::steady_clock::now();
  json j = json::parse(run(""), nullptr, false);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900)) << "curl waited for 100-continue";
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["choices"][0]["text"], golden_text("a"));

  body["stream"] = true;
  {
    std::ofstream(dir + "/body.json") << body.dump();
  }
  const std::string streamed = run("-N");
  std::string text;
  std::vector<std::string> events = sse_events(streamed);
  ASSERT_FALSE(events.empty()) << streamed;
  EXPECT_EQ(events.back(), "[DONE]");
  for (const std::string& e : events) {
    if (e != "[DONE]") text += json::parse(e)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, golden_text("a"));
  std::filesystem::remove_all(dir);
}

class RecordingObserver : public RequestObserver {
 public:
  void on_request_done(const RequestRecord& record) override {
    std::lock_guard<std::mutex> lock(mu_);
    records.push_back(record);
  }
  std::vector<RequestRecord> take() {
    std::lock_guard<std::mutex> lock(mu_);
    return records;
  }

 private:
  std::mutex mu_;
  std::vector<RequestRecord> records;
};

TEST_F(GatewayTest, ObserverSeesEveryRequestWithItsAdapterAndTimings) {
  RecordingObserver observer;
  observer_ = &observer;
  ServerOptions server;
  server.port = 0;
  start(server);
  resolver_.set("tenant", "c");
  ASSERT_EQ(post("/v1/completions", greedy(kServed, 48), {{"X-Scenario", "tenant"}}).status, 200);
  ASSERT_EQ(post("/v1/completions", greedy("gpt-9")).status, 404);
  ASSERT_EQ(http_call(port_, http::verb::get, "/health").status, 200);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (observer.take().size() < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(Ms(5));
  std::vector<RequestRecord> records = observer.take();
  ASSERT_EQ(records.size(), 3u);
  // Reported as each answer is written, so not necessarily in request order.
  std::sort(records.begin(), records.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  const RequestRecord& ok = records[0];
  EXPECT_EQ(ok.adapter, "c");
  EXPECT_EQ(ok.scenario, "tenant");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.route, "/v1/completions");
  EXPECT_EQ(ok.completion_tokens, 48);
  EXPECT_GT(ok.prompt_tokens, 0);
  EXPECT_GE(ok.ttft_ms, 0);
  EXPECT_EQ(ok.itl_ms.size(), 47u);
  EXPECT_GE(ok.e2e_ms, ok.ttft_ms);
  EXPECT_EQ(ok.finish_reason, "length");
  EXPECT_EQ(records[1].status, 404);
  EXPECT_EQ(records[2].path, "/health");

  const json line = json::parse(format_request_log(ok));
  EXPECT_EQ(line["adapter"], "c");
  EXPECT_EQ(line["status"], 200);
  EXPECT_EQ(line["tokens_out"], 48);
  EXPECT_TRUE(line.contains("duration_ms"));
  EXPECT_TRUE(line.contains("ttft_ms"));
  gateway_.reset();
  observer_ = nullptr;
}

TEST_F(GatewayTest, AddedPrefixRoutesAreDispatched) {
  gateway_.reset();
  GatewayOptions options;
  options.server.port = 0;
  options.served_model_name = kServed;
  options.log_requests = false;
  auto gw = Gateway::create(options, bases_, nullptr);
  ASSERT_TRUE(gw.is_ok());
  gw.value()->router().add_prefix(http::verb::get, "/admin/", [](const std::shared_ptr<Exchange>& ex) {
    ex->respond(json_response(http::status::ok, {{"path", ex->record().path}}));
  });
  const uint16_t port = gw.value()->start().value();
  ClientResponse r = http_call(port, http::verb::get, "/admin/adapters/a?verbose=1");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.json()["path"], "/admin/adapters/a");
  EXPECT_EQ(http_call(port, http::verb::post, "/admin/x").status, 405);
  // Without a resolver, a scenario is unknown.
  ClientResponse s = post_json(port, "/v1/completions", greedy(kServed, 4), {{"X-Scenario", "x"}});
  EXPECT_EQ(s.status, 404);
  EXPECT_EQ(s.json()["error"]["param"], "scenario");
}

TEST_F(GatewayTest, GracefulStopFinishesInFlightAndRefusesNewConnections) {
  json body = greedy(kServed, 480);
  body["ignore_eos"] = true;
  body["stream"] = true;
  TestConnection conn(port_);
  ClientResponse head = conn.send_and_read_header(http::verb::post, "/v1/completions", body.dump());
  ASSERT_EQ(head.status, 200) << head.error;
  ASSERT_NE(conn.read_body_until("data: ").find("data: "), std::string::npos);
  TestConnection idle(port_);  // an idle keep-alive connection is closed by stop()
  ASSERT_TRUE(idle.connected());

  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    gateway_->stop();
    stopped = true;
  });
  // New connections are refused as soon as the acceptor closes.
  bool refused = false;
  for (int i = 0; i < 200 && !refused; ++i) {
    TestConnection late(port_);
    refused = !late.connected() || late.call(http::verb::get, "/health").status == 0;
    if (!refused) std::this_thread::sleep_for(Ms(2));
  }
  EXPECT_TRUE(refused);
  EXPECT_FALSE(gateway_->ready());

  // The in-flight stream still completes in full.
  const std::string all = conn.read_body_until("data: [DONE]");
  stopper.join();
  EXPECT_TRUE(stopped);
  std::vector<std::string> events = sse_events(all);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  json finish = json::parse(events[events.size() - 2]);
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "length");
  auto [data, closed] = idle.read_until_closed(std::chrono::seconds(1));
  EXPECT_TRUE(closed);
  EXPECT_TRUE(engine_drained(std::chrono::seconds(1)));
  gateway_->stop();  // idempotent
}

TEST_F(GatewayTest, StopPastTheDeadlineCancelsWhatIsLeft) {
  ServerOptions server;
  server.port = 0;
  server.shutdown_deadline = Ms(0);
  start(server);
  json body = greedy(kServed, 480);
  body["ignore_eos"] = true;
  body["stream"] = true;
  TestConnection conn(port_);
  ASSERT_EQ(conn.send_and_read_header(http::verb::post, "/v1/completions", body.dump()).status, 200);
  gateway_->stop();
  const std::string all = conn.read_body_until("data: [DONE]");
  // It could not finish in 0 ms: it is told why it ended, and the stream still ends properly.
  EXPECT_NE(all.find("shutting down"), std::string::npos) << all;
  EXPECT_NE(all.find("data: [DONE]"), std::string::npos) << all;
  EXPECT_TRUE(engine_drained(std::chrono::seconds(1)));
}

}  // namespace
}  // namespace loragate::testing

namespace loragate::testing {
namespace {

// Not a test: serves on LG_GATEWAY_PORT (default 18080) for LG_GATEWAY_SECONDS
// (default 30) for poking with curl or wrk. Run with
// --gtest_also_run_disabled_tests --gtest_filter='*ServeForManualTesting'.
TEST_F(GatewayTest, DISABLED_ServeForManualTesting) {
  ServerOptions server;
  server.port = static_cast<uint16_t>(std::atoi(std::getenv("LG_GATEWAY_PORT") ? std::getenv("LG_GATEWAY_PORT") : "18080"));
  log_requests_ = true;
  start(server);
  resolver_.set("support", "b");
  std::fprintf(stderr, "serving on %u\n", port_);
  const char* seconds = std::getenv("LG_GATEWAY_SECONDS");
  std::this_thread::sleep_for(std::chrono::seconds(seconds ? std::atoi(seconds) : 30));
}

}  // namespace
}  // namespace loragate::testing
