// The prefix cache on the real binary, against a second server with
// engine.prefix_caching false: requests that share a long prefix across the
// ../shared/eval scenarios' adapters, salts, echo with prompt logprobs, and a
// promote and rollback of the base. Every answer (text and every logprob) is
// equal on both servers; cached_tokens says the caching one reused what it
// may, and nothing it may not (another adapter, another salt, another base).
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/serve/serve_calls.h"
#include "tests/serve/server_process.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

using nlohmann::json;
using testing::kServeToken;
using testing::serve_call;
using testing::ServerProcess;

std::string prefix_eval_dir() { return testing::shared_dir() + "/eval"; }

// The prompt ids of the first `n` eval items of `scenario`.
std::vector<json> prefix_eval_prompts(const std::string& scenario, size_t n) {
  std::ifstream in(prefix_eval_dir() + "/scenarios/" + scenario + "/eval.jsonl");
  std::vector<json> out;
  for (std::string line; out.size() < n && std::getline(in, line);) out.push_back(json::parse(line).at("prompt_ids"));
  return out;
}

class PrefixCacheE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("eval/bases/candidate-good/model.safetensors");
    for (bool caching : {true, false}) {
      const std::string dir = testing::make_temp_dir(caching ? "lg-prefix-on" : "lg-prefix-off");
      std::ofstream(dir + "/config.yaml")
          << "model: {path: " << testing::shared_dir() << "/models/stories260K, served_name: online}\n"
          << "adapters: {roots: [" << prefix_eval_dir() << "/adapters], registry: " << dir << "/registry.db}\n"
          << "bases: {roots: [" << prefix_eval_dir() << "/bases]}\n"
          << "engine: {max_loras: 4, kv_cache_mib: 64, prefix_caching: " << (caching ? "true" : "false") << "}\n"
          << "evaluation: {require_pass_to_promote: false}\n"
          << "server: {io_threads: 2}\n";
      ServerProcess& p = caching ? on_process_ : off_process_;
      std::string& url = caching ? on_ : off_;
      url = p.start({"--config", dir + "/config.yaml", "--admin-token", kServeToken});
      ASSERT_FALSE(url.empty()) << p.output();
      for (const char* base : {"online", "candidate-good"}) {
        if (std::string(base) == "candidate-good") {
          ASSERT_EQ(serve_call(url, "POST", "/admin/bases",
                               {{"name", base}, {"path", prefix_eval_dir() + "/bases/candidate-good"}})
                        .status,
                    202);
          wait_candidate(url);
        }
        for (const char* s : {"mia", "cat", "sunny"}) {
          json adapter = {{"name", s}, {"path", prefix_eval_dir() + "/adapters/" + base + "/" + s}};
          if (std::string(base) != "online") adapter["base"] = base;
          ASSERT_EQ(serve_call(url, "POST", "/admin/adapters", adapter).status, 201) << base << "/" << s;
        }
      }
    }
  }

  static void wait_candidate(const std::string& url) {
    for (int i = 0; i < 300; ++i) {
      const json all = json::parse(serve_call(url, "GET", "/admin/bases").body);
      for (const json& b : all.at("data")) {
        if (b.at("name") == "candidate-good" && b.at("state") != "loading") return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL() << "candidate-good did not load";
  }

  // The same completion on both servers: equal answers; the caching server's cached_tokens.
  int64_t both(json body) {
    body["max_tokens"] = body.value("max_tokens", 12);
    body["temperature"] = 0;
    body["logprobs"] = 5;
    const auto on = serve_call(on_, "POST", "/v1/completions", body);
    const auto off = serve_call(off_, "POST", "/v1/completions", body);
    EXPECT_EQ(on.status, 200) << on.body;
    EXPECT_EQ(off.status, 200) << off.body;
    if (on.status != 200 || off.status != 200) return -1;
    const json a = json::parse(on.body), b = json::parse(off.body);
    EXPECT_EQ(a.at("choices"), b.at("choices")) << "model " << body.at("model");  // text and every logprob
    EXPECT_EQ(a.at("system_fingerprint"), b.at("system_fingerprint"));
    EXPECT_EQ(b.at("usage").at("prompt_tokens_details").at("cached_tokens"), 0);
    return a.at("usage").at("prompt_tokens_details").at("cached_tokens").get<int64_t>();
  }

  ServerProcess on_process_, off_process_;
  std::string on_, off_;
};

TEST_F(PrefixCacheE2eTest, CachedAnswersEqualAServerWithCachingOff) {
  // A shared "system prompt" of the first mia items, then one more item each.
  const std::vector<json> items = prefix_eval_prompts("mia", 8);
  ASSERT_EQ(items.size(), 8u);
  json system = json::array();
  for (size_t i = 0; i < 4; ++i) system.insert(system.end(), items[i].begin(), items[i].end());
  ASSERT_GE(system.size(), 40u);
  auto prompt = [&](size_t i) {
    json p = system;
    p.insert(p.end(), items[i].begin(), items[i].end());
    return p;
  };
  const int64_t full_blocks = static_cast<int64_t>(system.size()) / 16 * 16;

  EXPECT_EQ(both({{"model", "mia"}, {"prompt", prompt(4)}}), 0);
  EXPECT_GE(both({{"model", "mia"}, {"prompt", prompt(5)}}), full_blocks);   // another turn on the same prefix
  EXPECT_EQ(both({{"model", "cat"}, {"prompt", prompt(5)}}), 0);             // another adapter
  EXPECT_GE(both({{"model", "cat"}, {"prompt", prompt(6)}}), full_blocks);
  EXPECT_EQ(both({{"model", "online"}, {"prompt", prompt(6)}}), 0);          // the base alone
  EXPECT_EQ(both({{"model", "mia"}, {"prompt", prompt(7)}, {"cache_salt", "tenant-a"}}), 0);
  EXPECT_GE(both({{"model", "mia"}, {"prompt", prompt(4)}, {"cache_salt", "tenant-a"}}), full_blocks);
  EXPECT_EQ(both({{"model", "mia"}, {"prompt", prompt(4)}, {"cache_salt", "tenant-b"}}), 0);
  // echo + logprobs scores every prompt token: nothing may come from the cache.
  EXPECT_EQ(both({{"model", "mia"}, {"prompt", prompt(5)}, {"echo", true}, {"max_tokens", 1}}), 0);

  // Promote: the new base has its own blocks, never the old one's.
  for (const std::string& url : {on_, off_}) {
    const auto r = serve_call(url, "POST", "/admin/bases/candidate-good/promote", json{{"force", true}});
    ASSERT_EQ(r.status, 200) << r.body;
  }
  EXPECT_EQ(both({{"model", "mia"}, {"prompt", prompt(5)}}), 0);
  EXPECT_GE(both({{"model", "mia"}, {"prompt", prompt(6)}}), full_blocks);
  // Rollback: the online base's own blocks are still its own, and still right.
  for (const std::string& url : {on_, off_}) {
    const auto r = serve_call(url, "POST", "/admin/bases/rollback");
    ASSERT_EQ(r.status, 200) << r.body;
  }
  EXPECT_GE(both({{"model", "mia"}, {"prompt", prompt(7)}}), full_blocks);

  // The counters, as vLLM names them.
  const std::string page = serve_call(on_, "GET", "/metrics").body;
  EXPECT_GT(testing::metric_value(page, "vllm:prefix_cache_hits"), 0) << page.substr(0, 400);
  EXPECT_GT(testing::metric_value(page, "vllm:prefix_cache_queries"),
            testing::metric_value(page, "vllm:prefix_cache_hits"));
}

}  // namespace
}  // namespace loragate
