// Large prompts: text that cannot fit the model length is refused before it
// is rendered or tokenised, and the rendering and tokenising of prompts that
// may fit run off the network threads, so /health answers meanwhile.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>
#include <vector>

#include "tests/gateway/admin_fixture.h"
#include "tests/gateway/gateway_fixture.h"

namespace loragate::testing {
namespace {

using nlohmann::json;

// About `bytes` of story text.
std::string story_text(size_t bytes) {
  const std::string sentence = "Once upon a time there was a little girl who liked to play in the park. ";
  std::string text;
  while (text.size() < bytes) text += sentence;
  return text;
}

json chat_body(const std::string& content) {
  return {{"messages", json::array({{{"role", "user"}, {"content", content}}})}, {"temperature", 0}};
}

TEST_F(GatewayTest, ChatTooLongForTheModelIsRefusedBeforeRendering) {
  // 512 tokens of context, no piece longer than 9 bytes: 40 KB cannot fit.
  ClientResponse r = post("/v1/chat/completions", chat_body(story_text(40'000)));
  ASSERT_EQ(r.status, 400) << r.body;
  const json error = r.json()["error"];
  EXPECT_EQ(error["param"], "messages");
  EXPECT_EQ(error["code"], "context_length_exceeded");
  const std::string message = error["message"].get<std::string>();
  EXPECT_NE(message.find("bytes that can fit in the model length of 512 tokens"), std::string::npos) << message;

  // Below the bound the rendered prompt is counted in tokens, as before.
  ClientResponse counted = post("/v1/chat/completions", chat_body(story_text(6'000)));
  ASSERT_EQ(counted.status, 400) << counted.body;
  EXPECT_NE(counted.json()["error"]["message"].get<std::string>().find("the rendered prompt is"), std::string::npos)
      << counted.body;
}

TEST_F(GatewayTest, CompletionPromptTooLongForTheModelIsRefusedBeforeTokenising) {
  ClientResponse r = post("/v1/completions", {{"prompt", story_text(40'000)}, {"max_tokens", 1}});
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["param"], "prompt");
  EXPECT_EQ(r.json()["error"]["code"], "context_length_exceeded");
  // A prompt that fits still runs, echo included.
  ClientResponse echoed = post("/v1/completions", {{"prompt", kGoldenPrompt}, {"max_tokens", 0}, {"echo", true}});
  ASSERT_EQ(echoed.status, 200) << echoed.body;
  EXPECT_EQ(echoed.json()["choices"][0]["text"], kGoldenPrompt);
}

// stories260K with a 64K-token model length: a megabyte of chat may fit, so
// it is rendered and tokenised (about a second for the pair).
class LongContextTest : public AdminGatewayTest {
 protected:
  void SetUp() override {
    model_copy_ = make_temp_dir("lg-long-context");
    const std::string original = gateway_fixture_dir() + "/models/stories260K";
    for (const auto& entry : std::filesystem::directory_iterator(original)) {
      if (entry.path().filename() == "config.json") continue;
      std::filesystem::create_symlink(entry.path(), model_copy_ + "/" + entry.path().filename().string());
    }
    std::ifstream in(original + "/config.json");
    json config = json::parse(in);
    config["max_position_embeddings"] = 65536;
    std::ofstream(model_copy_ + "/config.json") << config.dump(2);
    AdminGatewayTest::SetUp();
  }
  void TearDown() override {
    AdminGatewayTest::TearDown();
    if (!model_copy_.empty()) std::filesystem::remove_all(model_copy_);
  }
  std::string model_dir() const override { return model_copy_; }

  std::string model_copy_;
};

TEST_F(LongContextTest, HealthAnswersWhileHugeChatsAreTokenised) {
  const std::string body = chat_body(story_text(900'000)).dump();
  std::atomic<bool> busy{true};
  double worst_health_ms = 0;
  int probes = 0;
  std::thread prober([&] {
    TestConnection conn(port_);
    while (busy) {
      const auto start = Clock::now();
      ClientResponse r = conn.call(http::verb::get, "/health");
      if (r.status != 200) {
        worst_health_ms = 1e9;
        return;
      }
      worst_health_ms = std::max(worst_health_ms, ms_since(start));
      ++probes;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the probe's connection is up
  std::vector<std::future<std::pair<ClientResponse, double>>> chats;
  for (int i = 0; i < 2; ++i) {
    chats.push_back(std::async(std::launch::async, [&] {
      const auto start = Clock::now();
      ClientResponse r = http_call(port_, http::verb::post, "/v1/chat/completions", body);
      return std::make_pair(r, ms_since(start));
    }));
  }
  double slowest_chat_ms = 0;
  for (auto& chat : chats) {
    auto [r, ms] = chat.get();
    // Tokenised in full: about 200K tokens, more than the model length.
    EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
    EXPECT_NE(r.body.find("the rendered prompt is"), std::string::npos) << r.body.substr(0, 300);
    slowest_chat_ms = std::max(slowest_chat_ms, ms);
  }
  busy = false;
  prober.join();
  ASSERT_GT(probes, 0);
  // On the network thread the chats held /health for about as long as one of them took.
  EXPECT_LT(worst_health_ms, slowest_chat_ms / 4)
      << "the slower chat took " << slowest_chat_ms << " ms; the slowest of " << probes << " /health probes "
      << worst_health_ms << " ms";
}

}  // namespace
}  // namespace loragate::testing
