// Soak: `loragate serve` under a steady mixed load for LORAGATE_SOAK_SECONDS
// (default 60): three adapters and the base, streamed and whole responses,
// clients that cancel a stream or hang up before the answer, and an adapter
// registered and removed over and over. Asserts no unexpected answer, greedy
// texts that agree with a reference taken before the load (batching must not
// change them), RSS that stays flat once warm, and at the end nothing left
// behind: no running or queued sequence, no KV block, no pinned adapter slot.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

#include "tests/serve/serve_calls.h"
#include "tests/serve/server_process.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

using nlohmann::json;
using testing::serve_call;
using testing::ServerProcess;

constexpr int kReferenceTokens = 32;
const std::vector<std::string> kModels = {"stories", "a", "b", "c"};

int soak_seconds() {
  const char* env = std::getenv("LORAGATE_SOAK_SECONDS");
  return env && std::atoi(env) > 0 ? std::atoi(env) : 60;
}

json greedy(const std::string& model, int max_tokens) {
  return {{"model", model}, {"prompt", "Once upon a time"}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

struct Tally {
  std::mutex mu;
  std::map<std::string, int64_t> counts;  // by kind of request, and "unexpected"
  std::vector<std::string> unexpected;    // the first few, for the failure message
  void add(const std::string& kind) {
    std::lock_guard<std::mutex> lock(mu);
    ++counts[kind];
  }
  void fail(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    ++counts["unexpected"];
    if (unexpected.size() < 10) unexpected.push_back(what);
  }
};

// Sends a whole completion request on a raw socket and hangs up before the answer.
void hang_up_early(uint16_t port, const json& body) {
  const int fd = testing::raw_connect(port);
  if (fd < 0) return;
  const std::string text = body.dump();
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(text.size()) + "\r\n\r\n" + text;
  (void)!send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  close(fd);
}

class SoakTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("models/stories260K-lora/c/adapter_model.safetensors");
    dir_ = testing::make_temp_dir("lg-soak");
    std::ofstream(dir_ + "/config.yaml") << "model: {path: " << testing::shared_dir()
                                         << "/models/stories260K, served_name: stories}\n"
                                         << "adapters: {roots: [" << testing::shared_dir()
                                         << "/models/stories260K-lora], registry: " << dir_ << "/registry.db}\n"
                                         << "engine: {max_loras: 2}\n"  // fewer slots than adapters: evictions too
                                         << "server: {io_threads: 2}\n";
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string adapter_path(const std::string& name) const {
    return testing::shared_dir() + "/models/stories260K-lora/" + name;
  }
  std::string dir_;
};

TEST_F(SoakTest, MixedLoadLeavesNothingBehind) {
  ServerProcess server;
  const std::string url = server.start({"--config", dir_ + "/config.yaml", "--admin-token", testing::kServeToken});
  ASSERT_FALSE(url.empty()) << server.output();
  const uint16_t port = testing::url_port(url);
  for (const char* name : {"a", "b", "c"}) {
    ASSERT_EQ(serve_call(url, "POST", "/admin/adapters", {{"name", name}, {"path", adapter_path(name)}}).status, 201);
  }
  std::map<std::string, std::string> reference;  // greedy text of kReferenceTokens, one request at a time
  for (const std::string& m : kModels) {
    auto r = serve_call(url, "POST", "/v1/completions", greedy(m, kReferenceTokens), false);
    ASSERT_EQ(r.status, 200) << r.body;
    reference[m] = json::parse(r.body).at("choices")[0].at("text");
  }

  Tally tally;
  std::atomic<bool> stop{false};
  // A greedy text of fewer tokens must be a prefix of the reference.
  auto check_text = [&](const std::string& model, const std::string& text, const char* kind) {
    if (reference[model].rfind(text, 0) != 0) tally.fail(std::string(kind) + " " + model + ": '" + text + "'");
  };
  auto worker = [&](int seed) {
    std::mt19937 rng(seed);
    auto client = client::HttpClient::create(url);
    while (!stop) {
      const std::string model = kModels[rng() % kModels.size()];
      const int max_tokens = 2 + static_cast<int>(rng() % (kReferenceTokens - 1));
      json body = greedy(model, max_tokens);
      switch (rng() % 5) {
        case 0:
        case 1: {  // whole response
          auto r = client->request("POST", "/v1/completions", body.dump());
          if (!r.is_ok() || r->status != 200) {
            tally.fail("whole " + model + ": " + (r.is_ok() ? r->body : r.status().to_string()));
            client = client::HttpClient::create(url);
            break;
          }
          check_text(model, json::parse(r->body).at("choices")[0].at("text"), "whole");
          tally.add("whole");
          break;
        }
        case 2: {  // streamed to the end
          body["stream"] = true;
          std::string text;
          bool done = false;
          auto r = client->stream("POST", "/v1/completions", body.dump(), {}, [&](const client::SseEvent& e) {
            if (e.data == "[DONE]") done = true;
            else text += json::parse(e.data).at("choices")[0].at("text").get<std::string>();
            return true;
          });
          if (!r.is_ok() || r->status != 200 || !done) {
            tally.fail("stream " + model + ": " + (r.is_ok() ? r->body : r.status().to_string()));
            client = client::HttpClient::create(url);
            break;
          }
          check_text(model, text, "stream");
          tally.add("stream");
          break;
        }
        case 3: {  // stream cancelled after two events
          body["stream"] = true;
          body["max_tokens"] = kReferenceTokens;
          auto fresh = client::HttpClient::create(url);
          int events = 0;
          auto r = fresh->stream("POST", "/v1/completions", body.dump(), {},
                                 [&](const client::SseEvent&) { return ++events < 2; });
          if (r.is_ok() && r->status != 200) tally.fail("cancelled stream " + model + ": " + r->body);
          tally.add("cancelled");
          break;
        }
        default:  // hang up before the whole answer
          hang_up_early(port, body);
          tally.add("hung_up");
      }
    }
  };
  // An adapter registered and removed while requests name it: 200 or 404 (or
  // 409 while it is still in use / being removed), never anything else.
  auto churn = [&] {
    auto client = client::HttpClient::create(url);
    const client::Headers auth = {{"Authorization", std::string("Bearer ") + testing::kServeToken}};
    for (int i = 0; !stop; ++i) {
      auto added = client->request("POST", "/admin/adapters",
                                   json{{"name", "churn"}, {"path", adapter_path("c")}}.dump(), auth);
      if (added.is_ok() && added->status != 201 && added->status != 409 && added->status != 429)
        tally.fail("churn add: " + added->body);
      if (added.is_ok() && added->status == 201) tally.add("churn_added");
      auto used = client->request("POST", "/v1/completions", greedy("churn", 4).dump());
      if (used.is_ok() && used->status != 200 && used->status != 404) tally.fail("churn use: " + used->body);
      if (used.is_ok() && used->status == 200) tally.add("churn_used");
      auto removed = client->request("DELETE", "/admin/adapters/churn", "", auth);
      if (removed.is_ok() && removed->status != 200 && removed->status != 404 && removed->status != 409)
        tally.fail("churn remove: " + removed->body);
      tally.add("churn");
    }
  };

  const int seconds = soak_seconds();
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) threads.emplace_back(worker, 100 + i);
  threads.emplace_back(churn);
  long rss_warm = 0, rss_peak = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int s = 1; s <= seconds; ++s) {
    std::this_thread::sleep_until(t0 + std::chrono::seconds(s));
    const long rss = testing::rss_kib(server.pid());
    if (s == std::max(1, seconds / 3)) rss_warm = rss;
    if (rss_warm > 0) rss_peak = std::max(rss_peak, rss);
  }
  stop = true;
  for (std::thread& t : threads) t.join();

  // Cancelled and hung-up sequences are reaped asynchronously: wait for the engine to drain.
  std::string page;
  for (int i = 0; i < 100; ++i) {
    page = serve_call(url, "GET", "/metrics", nullptr, true).body;
    if (testing::metric_value(page, "loragate_running_sequences") == 0 &&
        testing::metric_value(page, "loragate_queue_length") == 0 &&
        testing::metric_value(page, "loragate_kv_blocks_used") == 0 &&
        testing::metric_value(page, "loragate_adapter_slots_pinned") == 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::printf("soak: %d s:", seconds);
  for (const auto& [kind, n] : tally.counts) std::printf(" %s=%lld", kind.c_str(), static_cast<long long>(n));
  std::printf("; RSS warm %ld KiB, peak after %ld KiB (+%ld)\n", rss_warm, rss_peak, rss_peak - rss_warm);
  EXPECT_EQ(tally.counts["unexpected"], 0) << [&] {
    std::string all;
    for (const std::string& u : tally.unexpected) all += u + "\n";
    return all;
  }();
  EXPECT_GT(tally.counts["whole"] + tally.counts["stream"], seconds) << "the load must have run";
  EXPECT_GT(tally.counts["cancelled"], 0);
  EXPECT_GT(tally.counts["hung_up"], 0);
  EXPECT_GT(tally.counts["churn_added"], 0);
  EXPECT_GT(tally.counts["churn_used"], 0);
  EXPECT_EQ(testing::metric_value(page, "loragate_running_sequences"), 0) << page.substr(0, 3000);
  EXPECT_EQ(testing::metric_value(page, "loragate_queue_length"), 0);
  EXPECT_EQ(testing::metric_value(page, "loragate_kv_blocks_used"), 0);
  EXPECT_EQ(testing::metric_value(page, "loragate_adapter_slots_pinned"), 0);
  if (testing::kRssIsMeaningful) {
    EXPECT_LT(rss_peak - rss_warm, 16 * 1024) << "RSS grew from " << rss_warm << " to " << rss_peak << " KiB";
  }
  EXPECT_EQ(server.stop(), 0) << "SIGTERM must drain and exit 0";
}

}  // namespace
}  // namespace loragate
