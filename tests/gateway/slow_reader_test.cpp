// A client that opens a long stream and does not read: once the kernel's
// buffers are full the server holds at most server.max_stream_buffer_bytes of
// its events, then cuts it off — its sequence cancelled, the connection
// closed, loragate_stream_overflow_total counted — while others are served.
#include <thread>

#include "gateway/metrics/metrics.h"
#include "tests/gateway/gateway_fixture.h"
#include "tests/gateway/raw_client.h"

namespace loragate::testing {
namespace {

using nlohmann::json;
using Ms = std::chrono::milliseconds;

// The gateway observes metrics_: it goes before metrics_ does.
class SlowReaderTest : public GatewayTest {
 protected:
  void TearDown() override {
    gateway_.reset();
    observer_ = nullptr;
  }
  Metrics metrics_{nullptr};
};

TEST_F(SlowReaderTest, StreamReaderTooSlowIsCutOffAndItsSequenceCancelled) {
  Metrics& metrics = metrics_;
  observer_ = &metrics;
  ServerOptions server;
  server.port = 0;
  server.max_stream_buffer_bytes = 4096;
  start(server);
  ASSERT_TRUE(engine_drained(std::chrono::seconds(1)));
  const int64_t generated_before = loop_->stats().generated_tokens;

  json body = greedy("c", 480);
  body["ignore_eos"] = true;
  body["stream"] = true;
  // A tiny receive window and segment size keep what the kernels buffer for
  // it (tens of KiB) well below the stream's size (about 70 KiB).
  RawClient slow(port_, {.receive_buffer = 1024, .max_segment = 536});
  ASSERT_TRUE(slow.connected());
  ASSERT_TRUE(slow.send_all(json_post("/v1/completions", body.dump())));

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (metrics.stream_overflows() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(Ms(10));
  }
  EXPECT_EQ(metrics.stream_overflows(), 1u);
  EXPECT_TRUE(engine_drained(std::chrono::seconds(2))) << "running " << loop_->stats().running;
  EXPECT_LT(loop_->stats().generated_tokens - generated_before, 480) << "the sequence ran to its end";
  EXPECT_NE(metrics.render().find("loragate_stream_overflow_total 1\n"), std::string::npos);

  // Others are served meanwhile.
  ClientResponse r = post("/v1/completions", greedy("a"));
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.json()["choices"][0]["text"], golden_text("a"));

  // What the slow client finally reads is the start of the stream, then the close.
  bool closed = false;
  const std::string got = slow.read_until_closed(std::chrono::seconds(10), &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_EQ(got.find("[DONE]"), std::string::npos);
}

}  // namespace
}  // namespace loragate::testing
