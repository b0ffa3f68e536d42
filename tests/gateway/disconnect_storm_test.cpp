// Many stream clients that leave at once while their heads and first chunks
// are being written, with a FIN or a reset (SO_LINGER 0): the server must not
// release what an async write still uses (the sanitizer CI job runs this under
// ASan/UBSan), every sequence is cancelled, and the server serves on.
#include <thread>
#include <vector>

#include "tests/gateway/gateway_fixture.h"
#include "tests/gateway/raw_client.h"

namespace loragate::testing {
namespace {

using nlohmann::json;

void storm(uint16_t port, const std::string& request, int clients) {
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([port, &request, i] {
      RawClient c(port);
      if (!c.connected() || !c.send_all(request)) return;
      switch (i % 3) {
        case 0:  // at once: the reset races the head's write
          c.reset();
          break;
        case 1:  // the head and a first event or so (a few hundred bytes), then a reset
          c.read_until("data: ", std::chrono::seconds(5));
          c.reset();
          break;
        default:  // the same, then an orderly close
          c.read_until("data: ", std::chrono::seconds(5));
          c.close();
          break;
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

TEST_F(GatewayTest, DisconnectStormDuringStreamWritesLeavesTheServerServing) {
  json body = greedy("a", 480);
  body["ignore_eos"] = true;
  body["stream"] = true;
  const std::string request = json_post("/v1/completions", body.dump());
  for (int round = 0; round < 4; ++round) storm(port_, request, 60);

  EXPECT_TRUE(engine_drained(std::chrono::seconds(10)))
      << "running " << loop_->stats().running << ", waiting " << loop_->stats().waiting;
  EXPECT_EQ(http_call(port_, http::verb::get, "/health").status, 200);
  ClientResponse r = post("/v1/completions", greedy("b"));
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.json()["choices"][0]["text"], golden_text("b"));
}

}  // namespace
}  // namespace loragate::testing
