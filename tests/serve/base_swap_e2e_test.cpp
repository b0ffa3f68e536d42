// Base generations end to end on the real binary: a candidate base loaded
// beside the serving one (../shared/eval: online = stories260K, candidate-good,
// each with its own mia/cat/sunny adapters), promote refused until every
// adapter and scenario has a version on it, promote -> rollback -> promote
// under 32 streaming clients without a failed request (every answer's text is
// the greedy continuation of the base its system_fingerprint names), forced
// promotion recorded, a base that fails to load, memory freed on DELETE, and
// restarts (clean and kill -9 mid-promote) serving exactly one base.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "client/http_client.h"
#include "tests/serve/serve_calls.h"
#include "tests/serve/server_process.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

using nlohmann::json;
using testing::ServerProcess;

constexpr const char* kSwapToken = "swap-token";
const char* const kScenarios[] = {"mia", "cat", "sunny"};

std::string eval_dir() { return testing::shared_dir() + "/eval"; }

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// One eval prompt and the greedy continuation each base gives it with its adapter.
struct Probe {
  std::string scenario;
  json prompt_ids;
  std::map<std::string, std::string> text;  // base -> continuation_text
};

// Items whose greedy choice is clear on both bases (no near-tie a float32
// engine may legitimately break the other way) and that never emit BOS.
std::vector<Probe> load_probes(const json& expected) {
  std::vector<Probe> probes;
  for (const char* s : kScenarios) {
    std::ifstream in(eval_dir() + "/scenarios/" + s + "/eval.jsonl");
    std::string line;
    size_t i = 0, kept = 0;
    while (std::getline(in, line) && kept < 12) {
      const json item = json::parse(line);
      Probe p{s, item.at("prompt_ids"), {}};
      bool clear = true;
      for (const char* base : {"online", "candidate-good"}) {
        const json& r = expected.at("results").at(base).at(s).at("adapter").at("items").at(i);
        const auto& ids = r.at("generated_ids");
        clear = clear && r.at("min_top2_margin").get<double>() > 1e-2 &&
                std::find(ids.begin(), ids.end(), 1) == ids.end();
        p.text[base] = r.at("continuation_text");
      }
      ++i;
      if (clear) {
        probes.push_back(std::move(p));
        ++kept;
      }
    }
  }
  return probes;
}

class BaseSwapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("eval/bases/candidate-good/model.safetensors");
    dir_ = testing::make_temp_dir("lg-swap");
    // The swap mechanics, without the evaluation promote asks for.
    write_config("evaluation: {require_pass_to_promote: false}\n");
  }

  void write_config(const std::string& evaluation) {
    std::ofstream(dir_ + "/config.yaml") << "model: {path: " << testing::shared_dir()
                                         << "/models/stories260K, served_name: online}\n"
                                         << "adapters: {roots: [" << eval_dir() << "/adapters], registry: " << dir_
                                         << "/registry.db}\n"
                                         << "bases: {roots: [" << eval_dir() << "/bases, " << dir_ << "]}\n"
                                         << "engine: {max_loras: 4, kv_cache_mib: 64}\n"
                                         << evaluation << "server: {io_threads: 2}\n";
  }

  std::string start(ServerProcess& p) {
    const std::string url = p.start({"--config", dir_ + "/config.yaml", "--admin-token", kSwapToken});
    EXPECT_FALSE(url.empty()) << p.output();
    return url;
  }

  static client::HttpResult call(const std::string& url, const std::string& method, const std::string& target,
                                 const json& body = nullptr) {
    auto c = client::HttpClient::create(url);
    EXPECT_TRUE(c.is_ok());
    auto r = c->request(method, target, body.is_null() ? "" : body.dump(),
                        {{"Authorization", std::string("Bearer ") + kSwapToken}});
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? *r : client::HttpResult{};
  }

  static json base_status(const std::string& url, const std::string& name) {
    const json all = json::parse(call(url, "GET", "/admin/bases").body);
    for (const json& b : all.at("data")) {
      if (b.at("name") == name) return b;
    }
    return nullptr;
  }

  // Polls until `name` has left the loading state; its final state.
  static std::string wait_loaded(const std::string& url, const std::string& name) {
    for (int i = 0; i < 300; ++i) {
      const json b = base_status(url, name);
      if (!b.is_null() && b.at("state") != "loading") return b.at("state");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return "timeout";
  }

  // Registers base `base`'s mia/cat/sunny adapters under those names, with a scenario each.
  static void register_scenarios(const std::string& url, const std::string& base, bool on_serving) {
    for (const char* s : kScenarios) {
      json adapter = {{"name", s}, {"path", eval_dir() + "/adapters/" + base + "/" + s}};
      json scenario = {{"adapter", s}};
      if (!on_serving) adapter["base"] = scenario["base"] = base;
      ASSERT_EQ(call(url, "POST", "/admin/adapters", adapter).status, 201) << base << "/" << s;
      ASSERT_EQ(call(url, "PUT", std::string("/admin/scenarios/") + s, scenario).status, 200) << base << "/" << s;
    }
  }

  // Serving online with its adapters, and candidate-good loaded beside it.
  std::string start_with_candidate(ServerProcess& server) {
    const std::string url = start(server);
    register_scenarios(url, "online", /*on_serving=*/true);
    auto added = call(url, "POST", "/admin/bases",
                      {{"name", "candidate-good"}, {"path", eval_dir() + "/bases/candidate-good"}});
    EXPECT_EQ(added.status, 202) << added.body;
    EXPECT_EQ(wait_loaded(url, "candidate-good"), "candidate");
    return url;
  }

  std::string dir_;
};

TEST_F(BaseSwapTest, PromoteRollbackPromoteUnderStreamingLoadFailsNothing) {
  const json expected = read_json(eval_dir() + "/expected_metrics.json");
  const std::vector<Probe> probes = load_probes(expected);
  ASSERT_GE(probes.size(), 12u);
  ServerProcess server;
  const std::string url = start_with_candidate(server);

  auto refused = call(url, "POST", "/admin/bases/candidate-good/promote");
  EXPECT_EQ(refused.status, 409) << refused.body;
  for (const char* what : {"adapter 'mia'", "adapter 'sunny'", "scenario 'cat'"}) {
    EXPECT_NE(refused.body.find(what), std::string::npos) << refused.body;
  }
  register_scenarios(url, "candidate-good", /*on_serving=*/false);

  std::atomic<bool> stop{false};
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};  // failures.size(), readable without mu
  std::mutex mu;
  std::vector<std::string> failures;  // guarded by mu
  std::map<std::string, int> by_base;
  std::vector<std::thread> clients;
  for (int c = 0; c < 32; ++c) {
    clients.emplace_back([&, c] {
      client::ClientOptions options;
      options.total_timeout = std::chrono::seconds(60);  // a stuck stream fails the test instead of hanging it
      auto http = client::HttpClient::create(url, options);
      if (!http.is_ok()) {
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back("client: " + http.status().to_string());
        ++failed;
        return;
      }
      for (size_t n = c; !stop.load(); n += 32) {
        const Probe& p = probes[n % probes.size()];
        json body = {{"prompt", p.prompt_ids}, {"max_tokens", 48}, {"temperature", 0}, {"stream", true}};
        client::Headers headers;
        if (c % 2 == 0) {
          body["model"] = p.scenario;  // the adapter name: a tenant's handle across bases
        } else {
          headers.emplace_back("X-Scenario", p.scenario);
        }
        std::string text, fingerprint, error;
        auto r = http->stream("POST", "/v1/completions", body.dump(), headers, [&](const client::SseEvent& e) {
          if (e.data == "[DONE]") return true;
          const json chunk = json::parse(e.data, nullptr, false);
          if (chunk.contains("error")) error = chunk["error"].dump();
          if (chunk.contains("system_fingerprint")) fingerprint = chunk["system_fingerprint"];
          if (chunk.contains("choices") && !chunk["choices"].empty()) text += chunk["choices"][0].value("text", "");
          return true;
        });
        const std::string base = fingerprint.substr(0, fingerprint.rfind('-'));
        std::lock_guard<std::mutex> lock(mu);
        if (!r.is_ok() || r->status != 200 || !error.empty()) {
          failures.push_back("status " + (r.is_ok() ? std::to_string(r->status) + " " + r->body : r.status().to_string()) + error);
          ++failed;
        } else if (!p.text.count(base) || p.text.at(base) != text) {
          failures.push_back("base '" + base + "' answered '" + text + "' for " + p.scenario);
          ++failed;
        } else {
          ++by_base[base];
          ++ok;
        }
      }
    });
  }
  // Until n more answers are in, one failed, or 60 s passed (a stalled server fails the test, never hangs it).
  auto wait_for = [&](int n) {
    const int target = ok.load() + n;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (ok.load() < target && failed.load() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (failed.load() == 0) {
      EXPECT_GE(ok.load(), target) << "no progress within 60 s";
    }
  };
  wait_for(64);
  auto promoted = call(url, "POST", "/admin/bases/candidate-good/promote", {{"by", "swap-test"}});
  EXPECT_EQ(promoted.status, 200) << promoted.body;
  wait_for(64);
  auto rolled_back = call(url, "POST", "/admin/bases/rollback");
  EXPECT_EQ(rolled_back.status, 200) << rolled_back.body;
  wait_for(64);
  EXPECT_EQ(call(url, "POST", "/admin/bases/candidate-good/promote").status, 200);
  wait_for(64);
  stop = true;
  for (std::thread& t : clients) t.join();

  EXPECT_TRUE(failures.empty()) << failures.size() << " failed, first: " << failures.front();
  EXPECT_GT(by_base["online"], 0);
  EXPECT_GT(by_base["candidate-good"], 0);
  EXPECT_EQ(base_status(url, "candidate-good").at("state"), "serving");
  EXPECT_EQ(base_status(url, "online").at("state"), "previous");
  const json swaps = json::parse(call(url, "GET", "/admin/bases").body).at("swaps");
  ASSERT_GE(swaps.size(), 3u);
  EXPECT_EQ(swaps[0].at("kind"), "promote");
  EXPECT_EQ(swaps[1].at("kind"), "rollback");
  EXPECT_EQ(swaps[2].at("actor"), "swap-test");
  const std::string metrics = call(url, "GET", "/metrics").body;
  EXPECT_NE(metrics.find("loragate_base_info{name=\"candidate-good\",state=\"serving\""), std::string::npos);
  EXPECT_NE(metrics.find("loragate_base_swaps_total{kind=\"rollback\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("vllm:num_requests_running"), std::string::npos);
  EXPECT_NE(metrics.find("vllm:lora_requests_info{max_lora=\"4\""), std::string::npos);
  EXPECT_EQ(server.stop(), 0);

  // A clean restart serves the promoted base again, with its adapters and scenarios.
  ServerProcess again;
  const std::string url2 = start(again);
  auto answer = call(url2, "POST", "/v1/completions",
                     {{"prompt", probes[0].prompt_ids}, {"max_tokens", 48}, {"temperature", 0}, {"model", probes[0].scenario}});
  ASSERT_EQ(answer.status, 200) << answer.body;
  const json a = json::parse(answer.body);
  EXPECT_EQ(a.at("system_fingerprint").get<std::string>().rfind("candidate-good-", 0), 0u) << answer.body;
  EXPECT_EQ(a.at("choices")[0].at("text"), probes[0].text.at("candidate-good"));
  EXPECT_EQ(wait_loaded(url2, "online"), "previous") << "the rollback target is loaded again";
  EXPECT_EQ(again.stop(), 0);
}

TEST_F(BaseSwapTest, ForceIsRecordedFailedLoadLeavesServingAloneAndDeleteFreesMemory) {
  ServerProcess server;
  const std::string url = start_with_candidate(server);

  // A base whose weights are garbage fails in the background; online serves on.
  std::filesystem::create_directory(dir_ + "/broken");
  std::filesystem::copy_file(eval_dir() + "/bases/candidate-good/config.json", dir_ + "/broken/config.json");
  std::ofstream(dir_ + "/broken/model.safetensors") << "not a safetensors file";
  ASSERT_EQ(call(url, "POST", "/admin/bases", {{"name", "broken"}, {"path", dir_ + "/broken"}}).status, 202);
  EXPECT_EQ(wait_loaded(url, "broken"), "failed");
  EXPECT_FALSE(base_status(url, "broken").value("error", "").empty());
  auto still = call(url, "POST", "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 4}});
  ASSERT_EQ(still.status, 200);
  EXPECT_EQ(json::parse(still.body).at("system_fingerprint").get<std::string>().rfind("online-", 0), 0u);
  EXPECT_EQ(call(url, "POST", "/admin/bases/broken/promote", {{"force", true}}).status, 409);
  EXPECT_EQ(call(url, "POST", "/admin/bases", {{"name", "x"}, {"path", testing::shared_dir() + "/models/stories260K"}}).status,
            400)
      << "outside bases.roots";
  EXPECT_EQ(call(url, "DELETE", "/admin/bases/online").status, 409) << "the serving base cannot be removed";

  // Forced: candidate-good has none of online's adapters; recorded as forced.
  auto forced = call(url, "POST", "/admin/bases/candidate-good/promote", {{"force", true}});
  ASSERT_EQ(forced.status, 200) << forced.body;
  EXPECT_EQ(json::parse(forced.body).at("forced"), true);
  EXPECT_NE(json::parse(forced.body).at("note").get<std::string>().find("adapter 'mia'"), std::string::npos);
  EXPECT_EQ(call(url, "POST", "/v1/completions", {{"model", "mia"}, {"prompt", "Hi"}, {"max_tokens", 2}}).status, 404)
      << "mia has no version on the new base";

  // DELETE of the previous base gives its weights and KV pool back (64 MiB of KV).
  auto rss_kib = [&] {
    std::ifstream statm("/proc/" + std::to_string(server.pid()) + "/statm");
    long size = 0, resident = 0;
    statm >> size >> resident;
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
  };
  const long before = rss_kib();
  ASSERT_EQ(call(url, "DELETE", "/admin/bases/online").status, 200);
  long after = before;
  for (int i = 0; i < 100 && before - after < 32 * 1024; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    after = rss_kib();
  }
  if (testing::kRssIsMeaningful) {
    EXPECT_GT(before - after, 32 * 1024) << "RSS " << before << " KiB -> " << after << " KiB";
  }
  EXPECT_TRUE(base_status(url, "online").is_null());
  EXPECT_EQ(server.stop(), 0);
}

TEST_F(BaseSwapTest, KillDuringPromoteRestartsOnExactlyOneBase) {
  for (int round = 0; round < 5; ++round) {
    ServerProcess server;
    const std::string url = start_with_candidate(server);
    if (round == 0) register_scenarios(url, "candidate-good", /*on_serving=*/false);
    // Fire the promote and kill the process after a growing delay, mid-flight.
    std::thread promote([&] {
      auto c = client::HttpClient::create(url);
      (void)c->request("POST", "/admin/bases/candidate-good/promote", R"({"force": true})",
                       {{"Authorization", std::string("Bearer ") + kSwapToken}});
    });
    std::this_thread::sleep_for(std::chrono::microseconds(round == 0 ? 0 : 500 << round));
    server.kill_now();
    promote.join();

    ServerProcess again;
    const std::string url2 = start(again);
    const json all = json::parse(call(url2, "GET", "/admin/bases").body);
    int serving = 0;
    std::string serving_name;
    for (const json& b : all.at("data")) {
      if (b.at("state") == "serving") {
        ++serving;
        serving_name = b.at("name");
      }
    }
    EXPECT_EQ(serving, 1) << all.dump();
    const json& swaps = all.at("swaps");
    ASSERT_FALSE(swaps.empty());
    EXPECT_EQ(swaps[0].at("to"), serving_name) << "the registry's last swap names the base that serves";
    auto answer = call(url2, "POST", "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 2}});
    ASSERT_EQ(answer.status, 200) << answer.body;
    EXPECT_EQ(json::parse(answer.body).at("system_fingerprint").get<std::string>().rfind(serving_name + "-", 0), 0u);
    EXPECT_EQ(again.stop(), 0);
    std::filesystem::remove(dir_ + "/registry.db");
    std::filesystem::remove(dir_ + "/registry.db-wal");
    std::filesystem::remove(dir_ + "/registry.db-shm");
  }
}

}  // namespace
}  // namespace loragate

namespace loragate {
namespace {

// Promotion gated by the evaluator: promote needs a passing run of the
// candidate against the serving base with the current adapters.
TEST_F(BaseSwapTest, PromoteNeedsAPassingEvaluationWithTheCurrentAdapters) {
  // The suite in configs/ names the eval files of ../shared/eval: both are roots.
  write_config(std::string("evaluation: {roots: [") + LORAGATE_SOURCE_DIR + "/configs, " + eval_dir() +
               "], require_pass_to_promote: true}\n");
  const std::string suite = std::string(LORAGATE_SOURCE_DIR) + "/configs/eval-suite.yaml";
  ServerProcess server;
  const std::string url = start(server);
  register_scenarios(url, "online", /*on_serving=*/true);
  for (const char* base : {"candidate-good", "candidate-bad"}) {
    ASSERT_EQ(call(url, "POST", "/admin/bases", {{"name", base}, {"path", eval_dir() + "/bases/" + base}}).status, 202);
    ASSERT_EQ(wait_loaded(url, base), "candidate");
    register_scenarios(url, base, /*on_serving=*/false);
  }
  auto evaluate = [&](const std::string& candidate) {
    auto started = call(url, "POST", "/admin/evaluations", {{"candidate", candidate}, {"suite", suite}});
    EXPECT_EQ(started.status, 202) << started.body;
    const std::string target = "/admin/evaluations/" + std::to_string(json::parse(started.body).value("id", 0));
    for (int i = 0; i < 600; ++i) {
      const json job = json::parse(call(url, "GET", target).body);
      const std::string state = job.value("state", "");
      if (state != "running" && state != "queued") return job;  // queued: its worker has not taken it yet
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return json();
  };
  EXPECT_EQ(call(url, "POST", "/admin/evaluations", {{"candidate", "candidate-good"}, {"suite", "/etc/passwd"}}).status,
            400)
      << "suites must lie inside evaluation.roots";

  auto refused = call(url, "POST", "/admin/bases/candidate-good/promote");
  EXPECT_EQ(refused.status, 409);
  EXPECT_NE(refused.body.find("no passing evaluation"), std::string::npos) << refused.body;

  const json bad = evaluate("candidate-bad");
  EXPECT_EQ(bad.value("verdict", ""), "fail") << bad.dump();
  EXPECT_EQ(call(url, "POST", "/admin/bases/candidate-bad/promote").status, 409);

  const json good = evaluate("candidate-good");
  ASSERT_EQ(good.value("verdict", ""), "pass") << good.dump();
  auto promoted = call(url, "POST", "/admin/bases/candidate-good/promote", {{"by", "eval-test"}});
  ASSERT_EQ(promoted.status, 200) << promoted.body;
  EXPECT_EQ(json::parse(promoted.body).at("forced"), false);
  auto served = call(url, "POST", "/v1/completions", {{"model", "mia"}, {"prompt", "Once upon a time"}, {"max_tokens", 4}});
  ASSERT_EQ(served.status, 200);
  EXPECT_EQ(json::parse(served.body).at("system_fingerprint").get<std::string>().rfind("candidate-good-", 0), 0u);
  ASSERT_EQ(call(url, "POST", "/admin/bases/rollback").status, 200) << "a rollback needs no evaluation";

  // The passing run no longer covers candidate-good once an adapter it used changes.
  ASSERT_EQ(call(url, "PUT", "/admin/scenarios/mia", {{"adapter", "cat"}, {"base", "candidate-good"}}).status, 200);
  auto stale = call(url, "POST", "/admin/bases/candidate-good/promote");
  EXPECT_EQ(stale.status, 409);
  EXPECT_NE(stale.body.find("changed since"), std::string::npos) << stale.body;
  auto forced = call(url, "POST", "/admin/bases/candidate-good/promote", {{"force", true}});
  ASSERT_EQ(forced.status, 200) << forced.body;
  EXPECT_EQ(json::parse(forced.body).at("forced"), true);
  EXPECT_NE(json::parse(forced.body).at("note").get<std::string>().find("changed since"), std::string::npos);
  const json runs = json::parse(call(url, "GET", "/admin/evaluations").body).at("runs");
  EXPECT_EQ(runs.size(), 2u);
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace loragate

namespace loragate {
namespace {

TEST_F(BaseSwapTest, ShadowTrafficRunsLiveRequestsOnTheCandidateToo) {
  const json expected = read_json(eval_dir() + "/expected_metrics.json");
  const std::vector<Probe> probes = load_probes(expected);
  ServerProcess server;
  const std::string url = start_with_candidate(server);
  register_scenarios(url, "candidate-good", /*on_serving=*/false);
  EXPECT_EQ(call(url, "POST", "/admin/bases/candidate-good/shadow", {{"fraction", 2}}).status, 400);
  EXPECT_EQ(call(url, "POST", "/admin/bases/online/shadow", {{"fraction", 1}}).status, 409) << "online serves";
  auto set = call(url, "POST", "/admin/bases/candidate-good/shadow", {{"fraction", 1.0}, {"scenarios", {"mia", "cat"}}});
  ASSERT_EQ(set.status, 200) << set.body;

  int live_ok = 0, mia = 0, cat = 0;
  for (const Probe& p : probes) {
    auto r = call(url, "POST", "/v1/completions",
                  {{"prompt", p.prompt_ids}, {"max_tokens", 48}, {"temperature", 0}, {"scenario", p.scenario}});
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    EXPECT_EQ(j.at("system_fingerprint").get<std::string>().rfind("online-", 0), 0u) << "the live answer is online's";
    EXPECT_EQ(j.at("choices")[0].at("text"), p.text.at("online"));
    ++live_ok;
    mia += p.scenario == "mia";
    cat += p.scenario == "cat";
  }
  json stats;
  for (int i = 0; i < 600; ++i) {  // the copies finish on the candidate's loop after the live answers (30 s: a loaded CI machine)
    stats = json::parse(call(url, "GET", "/admin/bases/candidate-good/shadow").body).at("stats");
    if (stats.contains("mia") && stats.contains("cat") && stats["mia"]["compared"] == stats["mia"]["shadowed"] &&
        stats["cat"]["compared"] == stats["cat"]["shadowed"]) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(live_ok, static_cast<int>(probes.size()));
  ASSERT_TRUE(stats.contains("mia")) << stats.dump();
  // Every live request was offered; a copy is dropped, never queued, while the candidate has 8 running.
  for (auto [name, n] : {std::pair<const char*, int>{"mia", mia}, {"cat", cat}}) {
    EXPECT_EQ(stats[name]["offered"], n) << stats.dump();
    EXPECT_EQ(stats[name]["shadowed"].get<int>() + stats[name]["dropped"].get<int>(), n) << stats.dump();
    EXPECT_EQ(stats[name]["compared"], stats[name]["shadowed"]) << stats.dump();
    EXPECT_GT(stats[name]["shadowed"].get<int>(), 0) << stats.dump();
  }
  EXPECT_FALSE(stats.contains("sunny")) << "only the scenarios asked for";
  // Agreement: the share of compared pairs with equal greedy ids; with every copy compared, the fixtures'.
  if (stats["mia"]["dropped"] == 0) {
    int agree = 0;
    for (const Probe& p : probes) agree += p.scenario == "mia" && p.text.at("online") == p.text.at("candidate-good");
    EXPECT_NEAR(stats["mia"]["agreement"].get<double>(), double(agree) / mia, 1e-9) << stats.dump();
  }
  EXPECT_GT(stats["mia"]["shadow_ttft_p50_ms"].get<double>(), 0);
  EXPECT_EQ(call(url, "POST", "/admin/bases/candidate-good/shadow", {{"fraction", 0}}).status, 200) << "off";
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace loragate
