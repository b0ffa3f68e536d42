// Faults an operator's machine throws at `loragate serve`, on a real process
// and loopback: kill -9 in the middle of admin writes, a registry on a full
// disk, overload, and clients that send slowly or not at all. Each test
// asserts what must hold: nothing committed is lost, serving goes on, errors
// are clear, memory stays flat.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "tests/serve/serve_calls.h"
#include "tests/serve/server_process.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

using nlohmann::json;
using testing::kServeToken;
using testing::serve_call;
using testing::ServerProcess;

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("models/stories260K-lora/a/adapter_model.safetensors");
    dir_ = testing::make_temp_dir("lg-fault");
    std::filesystem::create_directories(dir_ + "/adapters");
    registry_ = dir_ + "/registry.db";
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Writes config.yaml with `server_yaml` as the server section and starts the server.
  std::string start(ServerProcess& p, const std::string& server_yaml = "{io_threads: 2}") {
    std::ofstream(dir_ + "/config.yaml") << "model: {path: " << testing::shared_dir()
                                         << "/models/stories260K, served_name: stories}\n"
                                         << "adapters: {roots: [" << testing::shared_dir()
                                         << "/models/stories260K-lora, " << dir_ << "/adapters], registry: "
                                         << registry_ << "}\n"
                                         << "server: " << server_yaml << "\n";
    const std::string url = p.start({"--config", dir_ + "/config.yaml", "--admin-token", kServeToken});
    EXPECT_FALSE(url.empty()) << p.output();
    return url;
  }

  std::string adapter_path(const char* name) const {
    return testing::shared_dir() + "/models/stories260K-lora/" + name;
  }

  static json completion(const std::string& model, int max_tokens) {
    return {{"model", model}, {"prompt", "Once upon a time"}, {"max_tokens", max_tokens},
            {"temperature", 0}, {"ignore_eos", true}};
  }

  static std::set<std::string> names_in(const client::HttpResult& listing) {
    std::set<std::string> names;
    const json parsed = json::parse(listing.body);  // named: a range over a temporary's member would dangle
    for (const json& r : parsed.at("data")) names.insert(r.at("name").get<std::string>());
    return names;
  }

  std::string dir_, registry_;
};

// Registrations and scenarios written as fast as the API takes them, the
// process killed at a random moment; every write that was answered 2xx must be
// in the registry after a restart, and the registry must open every time.
TEST_F(FaultTest, KillDuringAdminWritesLosesNothingCommitted) {
  std::mt19937 rng(7);
  std::set<std::string> committed_adapters, committed_scenarios;
  for (int round = 0; round < 6; ++round) {
    ServerProcess server;
    const std::string url = start(server);
    ASSERT_FALSE(url.empty());
    std::mutex mu;
    std::atomic<bool> killed{false};
    std::thread writer([&] {
      for (int i = 0; !killed.load(); ++i) {
        const std::string name = "r" + std::to_string(round) + "-" + std::to_string(i);
        auto added = serve_call(url, "POST", "/admin/adapters", {{"name", name}, {"path", adapter_path(i % 2 ? "a" : "b")}});
        if (added.status == 0) break;  // the process is gone
        if (added.status != 201) continue;
        {
          std::lock_guard<std::mutex> lock(mu);
          committed_adapters.insert(name);
        }
        auto scenario = serve_call(url, "PUT", "/admin/scenarios/s" + name, {{"adapter", name}});
        if (scenario.status == 200) {
          std::lock_guard<std::mutex> lock(mu);
          committed_scenarios.insert("s" + name);
        }
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(100, 500)(rng)));
    server.kill_now();
    killed = true;
    writer.join();

    ServerProcess again;
    const std::string url2 = start(again);
    ASSERT_FALSE(url2.empty()) << "the registry must open after kill -9 (round " << round << ")";
    const client::HttpResult listing = serve_call(url2, "GET", "/admin/adapters");
    ASSERT_EQ(listing.status, 200) << listing.body;
    const std::set<std::string> adapters = names_in(listing);
    const std::set<std::string> scenarios = names_in(serve_call(url2, "GET", "/admin/scenarios"));
    std::lock_guard<std::mutex> lock(mu);
    for (const std::string& name : committed_adapters) EXPECT_TRUE(adapters.count(name)) << name << " lost: " << listing.body;
    for (const std::string& name : committed_scenarios) EXPECT_TRUE(scenarios.count(name)) << name << " lost";
    EXPECT_GE(committed_adapters.size(), static_cast<size_t>(round + 1)) << "some writes must have been answered";
    EXPECT_EQ(again.stop(), 0);
  }
}

// The registry's filesystem fills up: writes fail with a clear 5xx, serving
// (and reading the registry) goes on, and writes work again once there is room.
TEST_F(FaultTest, RegistryOnAFullDiskRefusesWritesAndServingGoesOn) {
  const std::string mnt = dir_ + "/small";
  std::filesystem::create_directories(mnt);
  if (mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=2m") != 0) {
    GTEST_SKIP() << "cannot mount a small tmpfs here (" << std::strerror(errno) << "); needs CAP_SYS_ADMIN";
  }
  registry_ = mnt + "/registry.db";
  {
    ServerProcess server;
    const std::string url = start(server);
    ASSERT_FALSE(url.empty());
    ASSERT_EQ(serve_call(url, "POST", "/admin/adapters", {{"name", "a"}, {"path", adapter_path("a")}}).status, 201);
    {  // Fill what is left of the filesystem.
      std::ofstream filler(mnt + "/filler", std::ios::binary);
      const std::string block(4096, 'x');
      while (filler.write(block.data(), block.size())) {
      }
    }
    int refused = 0;
    for (int i = 0; i < 20; ++i) {  // SQLite may fit a few rows into free pages; the disk is full soon after
      auto added = serve_call(url, "PUT", "/admin/scenarios/full-" + std::to_string(i) + std::string(200, 'x'),
                              {{"adapter", "a"}});
      if (added.status == 200) continue;
      ++refused;
      EXPECT_GE(added.status, 500) << added.body;
      EXPECT_NE(client::error_message(added).find("registry"), std::string::npos) << added.body;
      break;
    }
    EXPECT_EQ(refused, 1) << "a write to a full disk must fail";
    auto served = serve_call(url, "POST", "/v1/completions", completion("a", 8), false);
    EXPECT_EQ(served.status, 200) << served.body;
    EXPECT_EQ(serve_call(url, "GET", "/admin/adapters").status, 200);

    std::filesystem::remove(mnt + "/filler");
    auto again = serve_call(url, "POST", "/admin/adapters", {{"name", "b"}, {"path", adapter_path("b")}});
    EXPECT_EQ(again.status, 201) << again.body;
    EXPECT_EQ(server.stop(), 0);
  }
  umount2(mnt.c_str(), MNT_DETACH);
}

// An adapter's weights changed on disk after registration: a request already
// streaming with it finishes untouched; after a restart the reload is refused
// by SHA-256 with a clear error (503 naming the adapter to clients, the digests
// to operators); the original file back, it serves again.
TEST_F(FaultTest, ChangedAdapterFilesAreRefusedOnReloadAndInFlightRequestsFinish) {
  const std::string tenant = dir_ + "/adapters/tenant";
  std::filesystem::copy(adapter_path("a"), tenant, std::filesystem::copy_options::recursive);
  const std::string weights = tenant + "/adapter_model.safetensors";
  {
    ServerProcess server;
    const std::string url = start(server);
    ASSERT_FALSE(url.empty());
    ASSERT_EQ(serve_call(url, "POST", "/admin/adapters", {{"name", "tenant"}, {"path", tenant}}).status, 201);
    auto c = client::HttpClient::create(url);
    json body = completion("tenant", 200);
    body["stream"] = true;
    int events = 0;
    bool done = false;
    auto streamed = c->stream("POST", "/v1/completions", body.dump(), {}, [&](const client::SseEvent& e) {
      if (++events == 2) testing::flip_last_bit(weights);  // mid-stream
      if (e.data == "[DONE]") done = true;
      return true;
    });
    ASSERT_TRUE(streamed.is_ok()) << streamed.status().to_string();
    EXPECT_EQ(streamed->status, 200);
    EXPECT_TRUE(done) << "the request in flight finishes on the weights it started with";
    EXPECT_GT(events, 100);
    EXPECT_EQ(server.stop(), 0);
  }
  ServerProcess again;
  const std::string url = start(again);
  ASSERT_FALSE(url.empty());
  auto refused = serve_call(url, "POST", "/v1/completions", completion("tenant", 4), false);
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_NE(client::error_message(refused).find("adapter 'tenant'"), std::string::npos) << refused.body;
  EXPECT_EQ(refused.body.find(dir_), std::string::npos) << "no filesystem path for clients: " << refused.body;
  const std::string listing = serve_call(url, "GET", "/admin/adapters").body;
  EXPECT_NE(listing.find("changed since it was registered"), std::string::npos) << listing;
  EXPECT_EQ(serve_call(url, "POST", "/v1/completions", completion("stories", 4), false).status, 200)
      << "the base and other adapters serve on";

  testing::flip_last_bit(weights);  // the registered bytes again
  int status = 0;
  for (int i = 0; i < 40 && status != 200; ++i) {  // past the retry backoff
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    status = serve_call(url, "POST", "/v1/completions", completion("tenant", 4), false).status;
  }
  EXPECT_EQ(status, 200);
  EXPECT_EQ(again.stop(), 0);
}

// Past max_queued_requests the server answers 429 with Retry-After, and once
// the burst is over it serves normally; repeated bursts leave RSS flat.
TEST_F(FaultTest, OverloadGets429WithRetryAfterAndRecoversWithFlatMemory) {
  ServerProcess server;
  const std::string url = start(server, "{io_threads: 2, max_queued_requests: 4}");
  ASSERT_FALSE(url.empty());
  std::string others;  // answers that are neither 200 nor 429
  auto burst = [&](int* ok, int* limited, int* bad_retry_after) {
    std::vector<std::thread> clients;
    std::mutex mu;
    for (int i = 0; i < 32; ++i) {
      clients.emplace_back([&] {
        auto r = serve_call(url, "POST", "/v1/completions", completion("stories", 48), false);
        std::lock_guard<std::mutex> lock(mu);
        if (r.status == 200) ++*ok;
        if (r.status != 200 && r.status != 429) others += std::to_string(r.status) + " " + r.body + "\n";
        if (r.status == 429) {
          ++*limited;
          const std::string after = r.header("Retry-After");
          if (after.empty() || std::atoi(after.c_str()) < 1) ++*bad_retry_after;
        }
      });
    }
    for (std::thread& t : clients) t.join();
  };
  long rss_after_first = 0;
  for (int round = 0; round < 4; ++round) {
    int ok = 0, limited = 0, bad_retry_after = 0;
    burst(&ok, &limited, &bad_retry_after);
    EXPECT_EQ(ok + limited, 32) << "every request is either served or refused with 429:\n" << others;
    EXPECT_GE(ok, 4);
    EXPECT_GT(limited, 0) << "32 at once with a limit of 4";
    EXPECT_EQ(bad_retry_after, 0) << "every 429 says when to retry";
    if (round == 0) rss_after_first = testing::rss_kib(server.pid());
  }
  for (int i = 0; i < 8; ++i) {
    auto r = serve_call(url, "POST", "/v1/completions", completion("stories", 8), false);
    EXPECT_EQ(r.status, 200) << r.body;
  }
  const long rss_end = testing::rss_kib(server.pid());
  if (testing::kRssIsMeaningful) {
    EXPECT_LT(rss_end - rss_after_first, 16 * 1024) << "RSS " << rss_after_first << " -> " << rss_end << " KiB";
  }
  EXPECT_EQ(server.stop(), 0);
}

// Silent connections and slowloris clients (a header byte at a time) take
// descriptors but no service: others are answered promptly meanwhile, and the
// read timeout cuts the slow ones off.
TEST_F(FaultTest, SlowAndSilentClientsDoNotStarveOthers) {
  ServerProcess server;
  const std::string url = start(server, "{io_threads: 2, read_timeout_ms: 2000, idle_timeout_ms: 2000}");
  ASSERT_FALSE(url.empty());
  const uint16_t port = testing::url_port(url);
  std::vector<int> silent, slow;
  for (int i = 0; i < 64; ++i) silent.push_back(testing::raw_connect(port));
  for (int i = 0; i < 32; ++i) slow.push_back(testing::raw_connect(port));
  std::atomic<bool> done{false};
  std::thread dribbler([&] {
    const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n";
    for (size_t at = 0; !done && at < head.size(); ++at) {
      for (int fd : slow) (void)!send(fd, head.data() + at, 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  for (int i = 0; i < 6; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = serve_call(url, "POST", "/v1/completions", completion("stories", 16), false);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_LT(ms, 2000) << "a normal client waited behind slow ones";
  }
  // Past the read timeout the slow and silent connections are closed by the server.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  done = true;
  dribbler.join();
  // Reads until the server closes (true) or 3 s pass (false).
  auto closed_by_server = [](int fd) {
    timeval tv{3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[512];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0) {
    }
    return n == 0;
  };
  int silent_closed = 0, slow_closed = 0;
  for (int fd : silent) silent_closed += closed_by_server(fd);
  for (int fd : slow) slow_closed += closed_by_server(fd);
  EXPECT_EQ(silent_closed, 64) << "a connection that never sends is closed";
  EXPECT_EQ(slow_closed, 32) << "the read timeout cuts off a client that sends its header a byte at a time";
  for (int fd : silent) close(fd);
  for (int fd : slow) close(fd);
  EXPECT_EQ(serve_call(url, "GET", "/health", nullptr, false).status, 200);
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace loragate
