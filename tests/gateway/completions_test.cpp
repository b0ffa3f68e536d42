// /v1/completions over a real loopback server: golden greedy outputs for the
// base and each adapter (by model name and by scenario), streaming, and many
// concurrent clients on different adapters.
#include <thread>

#include "tests/gateway/gateway_fixture.h"

namespace loragate::testing {
namespace {

using nlohmann::json;

TEST_F(GatewayTest, CompletionMatchesGoldenBase) {
  ClientResponse r = post("/v1/completions", greedy(kServed));
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.headers["Content-Type"], "application/json");
  json j = r.json();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(j["model"], kServed);
  EXPECT_GT(j["created"].get<int64_t>(), 1600000000);
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["text"], golden_text("base"));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["usage"]["completion_tokens"], 48);
  EXPECT_EQ(j["usage"]["prompt_tokens"], (*golden_)["cases"][0]["num_prompt_tokens"]);
  EXPECT_EQ(j["usage"]["total_tokens"],
            j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());
}

TEST_F(GatewayTest, EmptyModelMeansBaseAndTokenIdPromptsWork) {
  json body = greedy("");
  body["prompt"] = (*golden_)["cases"][0]["prompt_ids"];
  ClientResponse r = post("/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["choices"][0]["text"], golden_text("base"));
  body["prompt"] = json::array({kGoldenPrompt});  // a list of one string
  r = post("/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["choices"][0]["text"], golden_text("base"));
}

TEST_F(GatewayTest, AdapterByModelNameMatchesGolden) {
  for (const char* name : {"a", "b", "c"}) {
    ClientResponse r = post("/v1/completions", greedy(name));
    ASSERT_EQ(r.status, 200) << r.body;
    json j = r.json();
    EXPECT_EQ(j["model"], name);
    EXPECT_EQ(j["choices"][0]["text"], golden_text(name)) << name;
    EXPECT_EQ(j["usage"]["completion_tokens"], 48) << name;
  }
}

TEST_F(GatewayTest, ScenarioByHeaderAndByBodyField) {
  resolver_.set("support", "b");
  ClientResponse r = post("/v1/completions", greedy(kServed), {{"X-Scenario", "support"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["choices"][0]["text"], golden_text("b"));
  // `model` is what the client asked for; the header says which adapter answered.
  EXPECT_EQ(r.json()["model"], kServed);
  EXPECT_EQ(r.headers["X-Adapter"], "b");
  json streamed = greedy(kServed);
  streamed["stream"] = true;
  r = post("/v1/completions", streamed, {{"X-Scenario", "support"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["X-Adapter"], "b") << "a stream's head names it too";

  json body = greedy(kServed);
  body["scenario"] = "support";
  r = post("/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["choices"][0]["text"], golden_text("b"));

  // The header wins over the body field; a scenario may route to the base.
  resolver_.set("plain", "");
  r = post("/v1/completions", body, {{"X-Scenario", "plain"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["choices"][0]["text"], golden_text("base"));
  EXPECT_EQ(r.headers.count("X-Adapter"), 0u) << "the base answered: no adapter to name";

  r = post("/v1/completions", greedy(kServed), {{"X-Scenario", "nope"}});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.json()["error"]["param"], "scenario");

  // A model naming another adapter than the scenario's is a conflict.
  r = post("/v1/completions", greedy("a"), {{"X-Scenario", "support"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["param"], "model");
}

TEST_F(GatewayTest, StreamConcatenatesToTheSameText) {
  for (const char* model : {kServed, "c"}) {
    json body = greedy(model);
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    ClientResponse r = post("/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.error << r.body;
    EXPECT_EQ(r.headers["Content-Type"], "text/event-stream");
    EXPECT_EQ(r.headers["Transfer-Encoding"], "chunked");
    std::vector<std::string> events = sse_events(r.body);
    ASSERT_GE(events.size(), 3u) << r.body;
    EXPECT_EQ(events.back(), "[DONE]");
    std::string text;
    std::string finish;
    json usage;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
      json chunk = json::parse(events[i]);
      EXPECT_EQ(chunk["object"], "text_completion");
      if (chunk["choices"].empty()) {  // the usage chunk
        usage = chunk["usage"];
        continue;
      }
      text += chunk["choices"][0]["text"].get<std::string>();
      if (!chunk["choices"][0]["finish_reason"].is_null()) {
        EXPECT_TRUE(finish.empty()) << "two chunks with a finish_reason";
        finish = chunk["choices"][0]["finish_reason"];
      }
    }
    EXPECT_EQ(text, golden_text(model == std::string(kServed) ? "base" : model));
    EXPECT_EQ(finish, "length");
    EXPECT_EQ(usage["completion_tokens"], 48);
  }
}

TEST_F(GatewayTest, StopStringEndsTheTextInBothModes) {
  LG_REQUIRE_STORIES260K();  // its text
  json body = greedy(kServed);
  body["stop"] = "Lily";
  ClientResponse r = post("/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string full = golden_text("base");
  const std::string expected = full.substr(0, full.find("Lily"));
  EXPECT_EQ(r.json()["choices"][0]["text"], expected);
  EXPECT_EQ(r.json()["choices"][0]["finish_reason"], "stop");

  body["stream"] = true;
  r = post("/v1/completions", body);
  ASSERT_EQ(r.status, 200);
  std::string text;
  for (const std::string& e : sse_events(r.body)) {
    if (e == "[DONE]") break;
    text += json::parse(e)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, expected);
}

TEST_F(GatewayTest, ConcurrentClientsOnDifferentAdaptersGetTheirOwnAnswers) {
  const std::vector<std::string> models = {kServed, "a", "b", "c"};
  constexpr int kClients = 32;
  std::vector<ClientResponse> results(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      json body = greedy(models[i % models.size()]);
      body["stream"] = (i % 3 == 0);
      results[i] = post_json(port_, "/v1/completions", body);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    const std::string& model = models[i % models.size()];
    const std::string want = golden_text(model == kServed ? "base" : model);
    ASSERT_EQ(results[i].status, 200) << i << ": " << results[i].error << results[i].body;
    std::string text;
    if (i % 3 == 0) {
      for (const std::string& e : sse_events(results[i].body)) {
        if (e != "[DONE]") text += json::parse(e)["choices"][0]["text"].get<std::string>();
      }
    } else {
      text = results[i].json()["choices"][0]["text"];
    }
    EXPECT_EQ(text, want) << "client " << i << " on " << model;
  }
  EXPECT_TRUE(engine_drained(std::chrono::seconds(1)));
}

TEST_F(GatewayTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  TestConnection conn(port_);
  ASSERT_TRUE(conn.connected());
  for (int i = 0; i < 3; ++i) {
    ClientResponse r = conn.call(http::verb::post, "/v1/completions", greedy(kServed, 8).dump());
    ASSERT_EQ(r.status, 200) << r.error;
    EXPECT_EQ(r.json()["usage"]["completion_tokens"], 8);
  }
  ClientResponse h = conn.call(http::verb::get, "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.json()["status"], "ok");
}

TEST_F(GatewayTest, ModelsListsTheBaseAndEveryAdapter) {
  ClientResponse r = http_call(port_, http::verb::get, "/v1/models");
  ASSERT_EQ(r.status, 200);
  json j = r.json();
  EXPECT_EQ(j["object"], "list");
  std::map<std::string, json> by_id;
  for (const json& m : j["data"]) by_id[m["id"]] = m;
  ASSERT_EQ(by_id.count(kServed), 1u);
  EXPECT_TRUE(by_id[kServed]["parent"].is_null());
  for (const char* name : {"a", "b", "c"}) {
    ASSERT_EQ(by_id.count(name), 1u) << name;
    EXPECT_EQ(by_id[name]["parent"], kServed);
    EXPECT_EQ(by_id[name]["object"], "model");
    EXPECT_EQ(by_id[name]["owned_by"], "loragate");
  }
  EXPECT_EQ(http_call(port_, http::verb::get, "/ready").status, 200);
}

// logprobs: greedy picks the most likely token, so each step's chosen
// token is its own top alternative; the pieces spell the text.
TEST_F(GatewayTest, CompletionLogprobsDescribeTheGreedyTokens) {
  LG_REQUIRE_STORIES260K();  // its tokens' texts
  json body = greedy(kServed, 12);
  body["logprobs"] = 3;
  ClientResponse r = post("/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = r.json()["choices"][0];
  const json& lp = choice["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 12u);
  std::string joined;
  for (size_t i = 0; i < 12; ++i) {
    const std::string token = lp["tokens"][i];
    const double logprob = lp["token_logprobs"][i];
    EXPECT_LE(logprob, 0.0);
    EXPECT_EQ(lp["text_offset"][i], joined.size());
    joined += token;
    ASSERT_EQ(lp["top_logprobs"][i].size(), 3u) << lp["top_logprobs"][i].dump();
    double best = -1e9;
    for (const auto& [text, value] : lp["top_logprobs"][i].items()) best = std::max(best, value.get<double>());
    EXPECT_DOUBLE_EQ(best, logprob) << "greedy: the chosen token is the most likely";
    EXPECT_TRUE(lp["top_logprobs"][i].contains(token));
  }
  EXPECT_EQ(joined, choice["text"]);
}

}  // namespace
}  // namespace loragate::testing
