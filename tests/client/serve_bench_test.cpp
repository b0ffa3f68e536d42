#include "bench/serve_bench.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "tests/client/tiny_server.h"

namespace loragate::bench {
namespace {

using loragate::testing::TinyServer;
using nlohmann::json;
using namespace std::chrono_literals;

// --- sampling and statistics ---

TEST(ZipfSamplerTest, ProbabilitiesFollowTheExponent) {
  ZipfSampler z(5, 1.0);
  double total = 0;
  for (int k = 0; k < 5; ++k) total += z.probability(k);
  EXPECT_NEAR(total, 1.0, 1e-12);
  const double h5 = 1 + 1.0 / 2 + 1.0 / 3 + 1.0 / 4 + 1.0 / 5;
  EXPECT_NEAR(z.probability(0), 1.0 / h5, 1e-12);
  EXPECT_NEAR(z.probability(0) / z.probability(1), 2.0, 1e-9);
  EXPECT_NEAR(z.probability(0) / z.probability(3), 4.0, 1e-9);
  EXPECT_EQ(z.probability(-1), 0.0);
  EXPECT_EQ(z.probability(5), 0.0);

  ZipfSampler z2(3, 2.0);
  EXPECT_NEAR(z2.probability(0) / z2.probability(2), 9.0, 1e-9);

  ZipfSampler uniform(4, 0.0);
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(uniform.probability(k), 0.25, 1e-12);
}

TEST(ZipfSamplerTest, SamplesMatchTheProbabilities) {
  ZipfSampler z(10, 1.2);
  std::mt19937_64 rng(42);
  std::vector<int> counts(10, 0);
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const int k = z.sample(rng);
    ASSERT_GE(k, 0);
    ASSERT_LT(k, 10);
    ++counts[static_cast<size_t>(k)];
  }
  for (int k = 0; k < 10; ++k) EXPECT_NEAR(counts[static_cast<size_t>(k)] / double(n), z.probability(k), 0.005) << k;
}

TEST(ZipfSamplerTest, EdgeSizes) {
  std::mt19937_64 rng(1);
  ZipfSampler one(1, 3.0);
  EXPECT_EQ(one.probability(0), 1.0);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(one.sample(rng), 0);
  ZipfSampler none(0, 1.0);
  EXPECT_EQ(none.size(), 0);
  EXPECT_EQ(none.sample(rng), -1);
}

TEST(PoissonArrivalsTest, RateAndDeterminism) {
  const auto inf = poisson_arrivals(5, std::numeric_limits<double>::infinity(), 3);
  EXPECT_EQ(inf, std::vector<double>(5, 0.0));
  const auto a = poisson_arrivals(20000, 100.0, 7);
  EXPECT_EQ(a.front(), 0.0);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_NEAR(a.back() / (a.size() - 1), 0.01, 0.0004);  // mean gap 1/rate
  EXPECT_EQ(a, poisson_arrivals(20000, 100.0, 7));
  EXPECT_NE(a, poisson_arrivals(20000, 100.0, 8));
}

TEST(PercentileTest, NearestRank) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);  // unsorted on purpose
  EXPECT_EQ(percentile(v, 0), 1);
  EXPECT_EQ(percentile(v, 100), 100);
  EXPECT_EQ(percentile(v, 99), 99);  // rank round(0.99 * 99) = 98
  EXPECT_EQ(percentile(v, 50), 51);  // rank round(49.5) = 50
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(percentile({7}, 99), 7);
  EXPECT_EQ(percentile({}, 50), 0);
}

TEST(LatencyStatsTest, MillisecondsMeanMedianP99) {
  const LatencyStats s = latency_stats_ms({0.003, 0.001, 0.002});
  EXPECT_NEAR(s.mean, 2.0, 1e-9);
  EXPECT_NEAR(s.median, 2.0, 1e-9);
  EXPECT_NEAR(s.p99, 3.0, 1e-9);
  const LatencyStats empty = latency_stats_ms({});
  EXPECT_EQ(empty.mean, 0);
  EXPECT_EQ(empty.p99, 0);
}

// The value printed after `label` on its line of a report.
std::string value_of(const std::string& text, const std::string& label) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(label, 0) != 0) continue;
    std::istringstream rest(line.substr(label.size()));
    std::string v;
    rest >> v;
    return v;
  }
  return "<missing>";
}

RequestOutcome outcome(const std::string& model, double ttft, double e2e, int64_t tokens, int64_t prompt = 10) {
  RequestOutcome o;
  o.model = model;
  o.ok = true;
  o.status = 200;
  o.ttft_s = ttft;
  o.e2e_s = e2e;
  o.output_tokens = tokens;
  o.prompt_tokens = prompt;
  for (int64_t i = 1; i < tokens; ++i) o.itl_s.push_back((e2e - ttft) / static_cast<double>(tokens - 1));
  return o;
}

TEST(SummaryTest, TpotThroughputAndGoodput) {
  EXPECT_NEAR(outcome("a", 0.1, 1.0, 10).tpot_s(), 0.1, 1e-12);
  EXPECT_EQ(outcome("a", 0.1, 1.0, 1).tpot_s(), 0.0);

  ServeBenchOptions o;
  o.model = "base";
  o.slo_ttft_ms = 150;
  o.slo_tpot_ms = 60;
  std::vector<RequestOutcome> v = {
      outcome("a", 0.1, 0.55, 10),  // TPOT 50 ms: good
      outcome("a", 0.2, 0.29, 10),  // TTFT too slow
      outcome("b", 0.1, 1.0, 10),   // TPOT 100 ms too slow
      outcome("base", 0.05, 0.05, 1),  // one token: TPOT 0, good
  };
  RequestOutcome bad;
  bad.model = "b";
  bad.status = 503;
  bad.error = "503: overloaded";
  v.push_back(bad);
  RequestOutcome broken;
  broken.model = "a";
  broken.error = "timed out";
  v.push_back(broken);

  const ServeBenchReport r = summarize_serve(v, 2.0, o);
  EXPECT_EQ(r.completed, 4);
  EXPECT_EQ(r.failed, 2);
  EXPECT_EQ(r.failures_by_status.at(503), 1);
  EXPECT_EQ(r.failures_by_status.at(0), 1);
  EXPECT_EQ(r.first_error, "503: overloaded");
  EXPECT_EQ(r.output_tokens, 31);
  EXPECT_EQ(r.input_tokens, 40);
  EXPECT_NEAR(r.request_throughput, 2.0, 1e-12);
  EXPECT_NEAR(r.output_throughput, 15.5, 1e-12);
  EXPECT_NEAR(r.total_token_throughput, 35.5, 1e-12);
  EXPECT_TRUE(r.has_slo);
  EXPECT_EQ(r.good, 2);
  EXPECT_NEAR(r.goodput, 1.0, 1e-12);
  EXPECT_NEAR(r.ttft.mean, (100 + 200 + 100 + 50) / 4.0, 1e-9);
  EXPECT_NEAR(r.tpot.mean, (50 + 10 + 100) / 3.0, 1e-9);  // one-token requests have no TPOT
  EXPECT_EQ(r.base_requests, 1);
  EXPECT_EQ(r.requests_per_model.at("a"), 3);

  const std::string text = format_serve_report(r, o);
  EXPECT_EQ(value_of(text, "Successful requests:"), "4") << text;
  EXPECT_EQ(value_of(text, "Failed requests:"), "2") << text;
  EXPECT_EQ(value_of(text, "  HTTP 503:"), "1") << text;
  EXPECT_EQ(value_of(text, "Request goodput (req/s):"), "1.00") << text;
  EXPECT_EQ(value_of(text, "Output token throughput (tok/s):"), "15.50") << text;
  EXPECT_EQ(value_of(text, "Mean TTFT (ms):"), "112.50") << text;
  EXPECT_NE(text.find("P99 TTFT (ms):"), std::string::npos);
  EXPECT_NE(text.find("Mean ITL (ms):"), std::string::npos);
  EXPECT_NE(text.find("Median E2EL (ms):"), std::string::npos);
  EXPECT_EQ(value_of(text, "Distinct adapters used:"), "2") << text;
}

TEST(SummaryTest, SplitsTtftBetweenCacheHitsAndMisses) {
  ServeBenchOptions o;
  std::vector<RequestOutcome> v = {
      outcome("a", 0.500, 0.6, 4, 100),  // misses
      outcome("a", 0.300, 0.6, 4, 100),
      outcome("a", 0.020, 0.1, 4, 100),  // hits
      outcome("b", 0.040, 0.1, 4, 100),
      outcome("b", 0.030, 0.1, 4, 100),
  };
  v[2].cached_tokens = 96;
  v[3].cached_tokens = 64;
  v[4].cached_tokens = 32;
  RequestOutcome failed;  // a failed request counts in neither
  failed.model = "a";
  failed.cached_tokens = 80;
  failed.ttft_s = 9;
  v.push_back(failed);

  const ServeBenchReport r = summarize_serve(v, 1.0, o);
  EXPECT_EQ(r.completed, 5);
  EXPECT_EQ(r.cached_tokens, 192);
  EXPECT_EQ(r.input_tokens, 500);
  EXPECT_NEAR(r.hit_rate, 192.0 / 500.0, 1e-12);
  EXPECT_EQ(r.hit_requests, 3);
  EXPECT_EQ(r.miss_requests, 2);
  EXPECT_NEAR(r.ttft_hits.median, 30.0, 1e-9);
  EXPECT_NEAR(r.ttft_hits.p99, 40.0, 1e-9);
  EXPECT_NEAR(r.ttft_misses.median, 500.0, 1e-9);  // nearest rank of two: the upper
  EXPECT_NEAR(r.ttft_misses.mean, 400.0, 1e-9);
  EXPECT_NEAR(r.ttft.median, 40.0, 1e-9);  // all five together

  const std::string text = format_serve_report(r, o);
  EXPECT_EQ(value_of(text, "Cached prompt tokens:"), "192") << text;
  EXPECT_EQ(value_of(text, "Hit rate (cached / prompt tokens) (%):"), "38.40") << text;
  EXPECT_EQ(value_of(text, "Requests with a hit (cached > 0):"), "3") << text;
  EXPECT_EQ(value_of(text, "Requests without:"), "2") << text;
  EXPECT_EQ(value_of(text, "Median TTFT, hits (ms):"), "30.00") << text;
  EXPECT_EQ(value_of(text, "P99 TTFT, misses (ms):"), "500.00") << text;

  // No hits at all: the hit figures are zero, the misses carry every request.
  for (RequestOutcome& oc : v) oc.cached_tokens = 0;
  const ServeBenchReport cold = summarize_serve(v, 1.0, o);
  EXPECT_EQ(cold.hit_rate, 0.0);
  EXPECT_EQ(cold.hit_requests, 0);
  EXPECT_EQ(cold.miss_requests, 5);
  EXPECT_EQ(cold.ttft_hits.median, 0.0);
  EXPECT_NEAR(cold.ttft_misses.median, cold.ttft.median, 1e-12);
}

// --- against a fake OpenAI server ---

// /v1/models lists base + a0..a2 (and one adapter of another model);
// /v1/completions streams max_tokens one-word deltas, a finish event, usage
// and [DONE]. Model "broken" answers 404; "midfail" breaks off with an error event.
// A toy prefix cache: usage reports as cached the longest prefix, in whole
// 16-token blocks, shared with an earlier prompt of the same model and
// cache_salt (words count as tokens). With return_token_ids each delta carries its id.
struct FakeOpenAI {
  FakeOpenAI()
      : server([this](const testing::tiny::Request& req, testing::tiny::tcp::socket& s) { return handle(req, s); }) {}

  bool handle(const testing::tiny::Request& req, testing::tiny::tcp::socket& s) {
    if (req.target() == "/v1/models") {
      TinyServer::respond(s, 200, json({{"object", "list"},
                                        {"data",
                                         {{{"id", "base"}, {"object", "model"}, {"parent", nullptr}},
                                          {{"id", "a0"}, {"object", "model"}, {"parent", "base"}},
                                          {{"id", "a1"}, {"object", "model"}, {"parent", "base"}},
                                          {{"id", "other-x"}, {"object", "model"}, {"parent", "other"}},
                                          {{"id", "a2"}, {"object", "model"}, {"parent", "base"}}}}})
                                      .dump());
      return true;
    }
    if (req.target() != "/v1/completions") {
      TinyServer::respond(s, 404, R"({"error":{"message":"no route"}})");
      return true;
    }
    const json body = json::parse(req.body());
    {
      std::lock_guard<std::mutex> lock(mu);
      bodies.push_back(body);
    }
    const std::string model = body["model"];
    if (model == "broken") {
      TinyServer::respond(s, 404, R"({"error":{"message":"model 'broken' does not exist"}})");
      return true;
    }
    const int n = body["max_tokens"];
    std::vector<std::string> tokens;
    if (body["prompt"].is_string()) {
      std::istringstream words(body["prompt"].get<std::string>());
      for (std::string w; words >> w;) tokens.push_back(w);
    } else {
      for (const json& id : body["prompt"]) tokens.push_back(id.dump());
    }
    const int64_t prompt_tokens = static_cast<int64_t>(tokens.size());
    const int64_t cached = cached_prefix(model + "|" + body.value("cache_salt", ""), tokens);
    const bool with_ids = body.value("return_token_ids", false);
    TinyServer::write_raw(s, TinyServer::sse_head());
    auto event = [&](const json& j) { return TinyServer::write_raw(s, TinyServer::chunk("data: " + j.dump() + "\n\n")); };
    for (int i = 0; i < n; ++i) {
      std::this_thread::sleep_for(2ms);
      if (model == "midfail" && i == 2) {
        event({{"error", {{"message", "generation failed: boom"}, {"code", 500}}}});
        break;
      }
      json choice = {{"index", 0}, {"text", " w"}, {"finish_reason", nullptr}};
      if (with_ids) choice["token_ids"] = {100 + i};
      if (!event({{"object", "text_completion"}, {"choices", {choice}}})) return false;
    }
    if (model != "midfail") {
      event({{"choices", {{{"index", 0}, {"text", ""}, {"finish_reason", "length"}}}}});
      event({{"choices", json::array()},
             {"usage",
              {{"prompt_tokens", prompt_tokens},
               {"completion_tokens", n},
               {"total_tokens", prompt_tokens + n},
               {"prompt_tokens_details", {{"cached_tokens", cached}}}}}});
    }
    TinyServer::write_raw(s, TinyServer::chunk("data: [DONE]\n\n"));
    TinyServer::write_raw(s, TinyServer::chunk(""));
    return true;
  }

  // Tokens of `tokens` found in whole blocks before (never the last one), and remembers `tokens`.
  int64_t cached_prefix(const std::string& key, const std::vector<std::string>& tokens) {
    std::lock_guard<std::mutex> lock(mu);
    size_t best = 0;
    for (const auto& seen : prompts[key]) {
      size_t same = 0;
      while (same < seen.size() && same < tokens.size() && seen[same] == tokens[same]) ++same;
      best = std::max(best, same);
    }
    prompts[key].push_back(tokens);
    if (!tokens.empty()) best = std::min(best, tokens.size() - 1);
    return static_cast<int64_t>(best / 16 * 16);
  }

  std::mutex mu;
  std::vector<json> bodies;
  std::map<std::string, std::vector<std::vector<std::string>>> prompts;  // by model|salt
  TinyServer server;
};

ServeBenchOptions small(const FakeOpenAI& fake) {
  ServeBenchOptions o;
  o.url = fake.server.url();
  o.requests = 24;
  o.concurrency = 4;
  o.max_tokens = 5;
  o.prompt_len = 7;
  o.seed = 3;
  return o;
}

TEST(ServeBenchTest, RunsAgainstAStreamingServer) {
  FakeOpenAI fake;
  ServeBenchOptions o = small(fake);
  o.result_json = ::testing::TempDir() + "serve_bench_result.json";
  std::ostringstream out;
  auto r = run_serve_bench(o, out);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->completed, 24) << out.str();
  EXPECT_EQ(r->failed, 0);
  EXPECT_EQ(r->output_tokens, 24 * 5);
  EXPECT_EQ(r->input_tokens, 24 * 7);
  EXPECT_GT(r->ttft.mean, 1.0);   // the first token comes after a 2 ms sleep
  EXPECT_GT(r->itl.median, 1.0);  // so does every next one
  EXPECT_GT(r->tpot.mean, 1.0);
  EXPECT_GE(r->e2e.mean, r->ttft.mean);
  EXPECT_GT(r->duration_s, 0);
  EXPECT_EQ(r->base_requests, 0);
  for (const auto& [model, count] : r->requests_per_model) {
    EXPECT_TRUE(model == "a0" || model == "a1" || model == "a2") << model;  // not other-x
  }
  EXPECT_GT(r->requests_per_model["a0"], r->requests_per_model["a2"]);  // Zipf s=1: P(a0) = 3 P(a2)
  // One kept-alive connection per client thread, plus one for GET /v1/models.
  EXPECT_LE(fake.server.max_open(), 5);
  EXPECT_LE(fake.server.connections(), 5);
  EXPECT_NE(out.str().find("Serving Benchmark Result"), std::string::npos);

  ASSERT_EQ(fake.bodies.size(), 24u);
  const json& b = fake.bodies[0];
  EXPECT_EQ(b["stream"], true);
  EXPECT_EQ(b["max_tokens"], 5);
  EXPECT_EQ(b["ignore_eos"], true);
  EXPECT_EQ(b["stream_options"]["include_usage"], true);
  EXPECT_TRUE(b["prompt"].is_string());

  std::ifstream f(o.result_json);
  const json j = json::parse(f);
  EXPECT_EQ(j["completed"], 24);
  EXPECT_EQ(j["per_request"].size(), 24u);
  EXPECT_EQ(j["adapters"], json({"a0", "a1", "a2"}));
  std::remove(o.result_json.c_str());
}

TEST(ServeBenchTest, CountsFailuresByStatus) {
  FakeOpenAI fake;
  ServeBenchOptions o = small(fake);
  o.adapter_names = {"a0", "broken", "midfail"};
  o.zipf_s = 0;
  o.requests = 30;
  std::ostringstream out;
  auto r = run_serve_bench(o, out);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->completed + r->failed, 30);
  EXPECT_GT(r->completed, 0);
  EXPECT_GT(r->failures_by_status[404], 0);
  EXPECT_GT(r->failures_by_status[0], 0);  // the stream's error event
  EXPECT_EQ(r->failures_by_status[404], r->requests_per_model["broken"]);
  EXPECT_EQ(r->failures_by_status[0], r->requests_per_model["midfail"]);
  EXPECT_NE(out.str().find("HTTP 404:"), std::string::npos) << out.str();
}

TEST(ServeBenchTest, PoissonArrivalsPaceTheRun) {
  FakeOpenAI fake;
  ServeBenchOptions o = small(fake);
  o.requests = 12;
  o.rate = 40;
  std::ostringstream out;
  auto r = run_serve_bench(o, out);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->completed, 12);
  EXPECT_GE(r->duration_s, poisson_arrivals(12, 40, o.seed).back());
}

TEST(ServeBenchTest, BaseModelAndTokenIdPrompts) {
  FakeOpenAI fake;
  ServeBenchOptions o = small(fake);
  o.adapters = 0;
  o.token_ids = true;
  o.vocab = 50;
  o.requests = 6;
  std::ostringstream out;
  auto r = run_serve_bench(o, out);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->completed, 6);
  EXPECT_EQ(r->base_requests, 6);
  for (const json& b : fake.bodies) {
    EXPECT_EQ(b["model"], "base");
    ASSERT_TRUE(b["prompt"].is_array());
    EXPECT_EQ(b["prompt"].size(), 7u);
    for (const json& id : b["prompt"]) {
      EXPECT_GE(id.get<int>(), 3);
      EXPECT_LT(id.get<int>(), 50);
    }
  }
}

TEST(ServeBenchTest, PrefixAndBaseShare) {
  FakeOpenAI fake;
  ServeBenchOptions o = small(fake);
  o.adapter_names = {"x", "y"};
  o.model_prefix = "base:";
  o.model = "base";
  o.base_fraction = 0.5;
  o.requests = 40;
  std::ostringstream out;
  auto r = run_serve_bench(o, out);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->completed, 40);
  EXPECT_GT(r->base_requests, 5);
  EXPECT_LT(r->base_requests, 35);
  for (const auto& [model, count] : r->requests_per_model) {
    EXPECT_TRUE(model == "base" || model == "base:x" || model == "base:y") << model;
  }
}

// The request bodies the fake saw, by their "seed" (o.seed + conversation * turns + turn).
std::map<int, json> bodies_by_index(FakeOpenAI& fake, const ServeBenchOptions& o) {
  std::lock_guard<std::mutex> lock(fake.mu);
  std::map<int, json> by;
  for (const json& b : fake.bodies) by[static_cast<int>(b["seed"].get<uint64_t>() - o.seed)] = b;
  return by;
}

json read_json(const std::string& path) {
  std::ifstream f(path);
  return json::parse(f);
}

TEST(ServeBenchTest, SharedPrefixHitsAfterEachModelsFirstRequest) {
  FakeOpenAI fake;
  ServeBenchOptions o = small(fake);
  o.token_ids = true;
  o.vocab = 1000;
  o.shared_prefix_len = 40;
  o.prompt_len = 8;
  o.requests = 12;
  o.concurrency = 1;  // in order: each model's first request is its only miss
  o.result_json = ::testing::TempDir() + "serve_bench_prefix.json";
  std::ostringstream out;
  auto r = run_serve_bench(o, out);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->completed, 12) << out.str();
  const int models = static_cast<int>(r->requests_per_model.size());
  EXPECT_EQ(r->miss_requests, models);
  EXPECT_EQ(r->hit_requests, 12 - models);
  EXPECT_EQ(r->cached_tokens, 32 * (12 - models));  // the 40-token prefix in whole 16-token blocks
  EXPECT_EQ(r->input_tokens, 12 * 48);
  EXPECT_NEAR(r->hit_rate, 32.0 * (12 - models) / (12 * 48), 1e-12);
  EXPECT_NE(out.str().find("Prefix Cache"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("after a shared prefix of 40"), std::string::npos) << out.str();

  ASSERT_EQ(fake.bodies.size(), 12u);
  const json prefix(std::vector<json>(fake.bodies[0]["prompt"].begin(), fake.bodies[0]["prompt"].begin() + 40));
  std::set<std::string> tails;
  for (const json& b : fake.bodies) {
    ASSERT_EQ(b["prompt"].size(), 48u);
    EXPECT_EQ(json(std::vector<json>(b["prompt"].begin(), b["prompt"].begin() + 40)), prefix);
    tails.insert(json(std::vector<json>(b["prompt"].begin() + 40, b["prompt"].end())).dump());
    EXPECT_FALSE(b.contains("cache_salt"));
    EXPECT_FALSE(b.contains("return_token_ids"));  // single turns need no ids back
  }
  EXPECT_EQ(tails.size(), 12u);

  const json j = read_json(o.result_json);
  EXPECT_EQ(j["shared_prefix_len"], 40);
  EXPECT_EQ(j["cached_tokens"], r->cached_tokens);
  EXPECT_EQ(j["hit_requests"], r->hit_requests);
  EXPECT_NEAR(j["hit_rate"].get<double>(), r->hit_rate, 1e-12);
  EXPECT_NEAR(j["ttft_hits_ms"]["median"].get<double>(), r->ttft_hits.median, 1e-9);
  EXPECT_NEAR(j["ttft_misses_ms"]["p99"].get<double>(), r->ttft_misses.p99, 1e-9);
  int64_t cached = 0;
  for (const json& pr : j["per_request"]) cached += pr["cached_tokens"].get<int64_t>();
  EXPECT_EQ(cached, r->cached_tokens);
  std::remove(o.result_json.c_str());
}

TEST(ServeBenchTest, ACacheSaltPerRequestLeavesNothingToHit) {
  FakeOpenAI fake;
  ServeBenchOptions o = small(fake);
  o.shared_prefix_len = 40;  // words: the same prefix every time, but never the same salt
  o.requests = 10;
  o.concurrency = 2;
  o.cache_salt_per_request = true;
  std::ostringstream out;
  auto r = run_serve_bench(o, out);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->completed, 10);
  EXPECT_EQ(r->hit_requests, 0);
  EXPECT_EQ(r->miss_requests, 10);
  EXPECT_EQ(r->cached_tokens, 0);
  std::set<std::string> salts;
  for (const json& b : fake.bodies) {
    ASSERT_TRUE(b.contains("cache_salt"));
    salts.insert(b["cache_salt"].get<std::string>());
  }
  EXPECT_EQ(salts.size(), 10u);

  // Another run of the same options salts differently: nothing it sends can hit the first run's prompts.
  std::ostringstream again;
  ASSERT_TRUE(run_serve_bench(o, again).is_ok());
  for (const json& b : fake.bodies) salts.insert(b["cache_salt"].get<std::string>());
  EXPECT_EQ(salts.size(), 20u);
}

TEST(ServeBenchTest, EachTurnExtendsThePreviousPromptWithItsAnswerIds) {
  FakeOpenAI fake;
  ServeBenchOptions o = small(fake);
  o.token_ids = true;
  o.vocab = 1000;
  o.prompt_len = 20;
  o.requests = 3;  // conversations
  o.turns = 4;
  o.concurrency = 2;
  o.result_json = ::testing::TempDir() + "serve_bench_turns.json";
  std::ostringstream out;
  auto r = run_serve_bench(o, out);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->completed, 12) << out.str();
  EXPECT_EQ(r->miss_requests, 3);  // each conversation's first turn
  EXPECT_EQ(r->hit_requests, 9);
  // Turn t finds turn t-1's prompt: 20, 45, 70 tokens, in whole blocks: 16 + 32 + 64 per conversation.
  EXPECT_EQ(r->cached_tokens, 3 * (16 + 32 + 64));
  EXPECT_NE(out.str().find("3 conversations of 4 turns"), std::string::npos) << out.str();

  const std::map<int, json> by = bodies_by_index(fake, o);
  ASSERT_EQ(by.size(), 12u);
  for (int c = 0; c < 3; ++c) {
    for (int t = 1; t < 4; ++t) {
      const json& prev = by.at(c * 4 + t - 1);
      const json& cur = by.at(c * 4 + t);
      EXPECT_EQ(cur["model"], prev["model"]);  // one adapter per conversation
      EXPECT_EQ(cur["return_token_ids"], true);
      ASSERT_EQ(cur["prompt"].size(), prev["prompt"].size() + 5 + 20);
      json want = prev["prompt"];
      for (int i = 0; i < 5; ++i) want.push_back(100 + i);  // the answer's ids, as the fake streamed them
      EXPECT_EQ(json(std::vector<json>(cur["prompt"].begin(), cur["prompt"].begin() + static_cast<ptrdiff_t>(want.size()))),
                want)
          << "conversation " << c << ", turn " << t;
    }
  }
  const json j = read_json(o.result_json);
  EXPECT_EQ(j["turns"], 4);
  ASSERT_EQ(j["per_request"].size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(j["per_request"][i]["conversation"], i / 4);
    EXPECT_EQ(j["per_request"][i]["turn"], i % 4);
    EXPECT_EQ(j["per_request"][i]["cached_tokens"].get<int64_t>() > 0, i % 4 != 0) << i;
  }
  std::remove(o.result_json.c_str());
}

TEST(ServeBenchTest, TextTurnsContinueWithTheAnswersText) {
  FakeOpenAI fake;
  ServeBenchOptions o = small(fake);
  o.prompt_len = 6;
  o.requests = 2;
  o.turns = 3;
  std::ostringstream out;
  auto r = run_serve_bench(o, out);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->completed, 6);
  const std::map<int, json> by = bodies_by_index(fake, o);
  ASSERT_EQ(by.size(), 6u);
  for (int c = 0; c < 2; ++c) {
    for (int t = 1; t < 3; ++t) {
      const std::string prev = by.at(c * 3 + t - 1)["prompt"];
      const std::string cur = by.at(c * 3 + t)["prompt"];
      const std::string head = prev + " w w w w w ";  // five " w" deltas, then the new turn
      ASSERT_EQ(cur.rfind(head, 0), 0u) << cur;
      std::istringstream rest(cur.substr(head.size()));
      int words = 0;
      for (std::string w; rest >> w;) ++words;
      EXPECT_EQ(words, 6);
      EXPECT_FALSE(by.at(c * 3 + t).contains("return_token_ids"));  // text needs no ids
    }
  }
}

TEST(ServeBenchTest, AFailedTurnEndsItsConversation) {
  FakeOpenAI fake;
  ServeBenchOptions o = small(fake);
  o.adapter_names = {"midfail"};
  o.requests = 2;
  o.turns = 3;
  o.result_json = ::testing::TempDir() + "serve_bench_failed_turn.json";
  std::ostringstream out;
  auto r = run_serve_bench(o, out);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->completed, 0);
  EXPECT_EQ(r->failed, 6);
  EXPECT_EQ(fake.bodies.size(), 2u);  // only the first turns were sent
  EXPECT_NE(r->first_error.find("boom"), std::string::npos) << r->first_error;
  const json j = read_json(o.result_json);
  for (size_t i = 0; i < 6; ++i) {
    const std::string error = j["per_request"][i]["error"];
    EXPECT_EQ(error.find("not sent") != std::string::npos, i % 3 != 0) << i << ": " << error;
  }
  std::remove(o.result_json.c_str());
}

TEST(ServeBenchTest, RefusesNonsenseTurnsAndPrefix) {
  FakeOpenAI fake;
  ServeBenchOptions o = small(fake);
  o.turns = 0;
  std::ostringstream out;
  EXPECT_EQ(run_serve_bench(o, out).status().code(), StatusCode::kInvalidArgument);
  o.turns = 1;
  o.shared_prefix_len = -1;
  EXPECT_EQ(run_serve_bench(o, out).status().code(), StatusCode::kInvalidArgument);
}

TEST(ServeBenchTest, RefusesMoreAdaptersThanServed) {
  FakeOpenAI fake;
  ServeBenchOptions o = small(fake);
  o.adapters = 5;
  std::ostringstream out;
  auto r = run_serve_bench(o, out);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("only 3 adapters are served"), std::string::npos) << r.status().message();
}

TEST(ServeBenchTest, UnreachableServerFailsClearly) {
  ServeBenchOptions o;
  o.url = "http://127.0.0.1:1";
  std::ostringstream out;
  auto r = run_serve_bench(o, out);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("cannot connect"), std::string::npos) << r.status().message();
  o.url = "https://127.0.0.1:1";
  EXPECT_EQ(run_serve_bench(o, out).status().code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace loragate::bench
