// Scoring and identity over HTTP: /v1/completions with echo + logprobs +
// max_tokens 0 returns the prompt's token logprobs (first null) matching the
// numpy reference within 1e-4, with and without adapters; vLLM's
// prompt_logprobs; system_fingerprint and X-Base on every answer; X-Base
// needs the admin token; a chat prompt that fills the context is a 400.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "tests/gateway/gateway_fixture.h"

namespace loragate::testing {
namespace {

using nlohmann::json;

json reference_cases() {
  const auto here = std::filesystem::path(__FILE__).parent_path();
  std::ifstream in(here / "../engine/data/prompt_logprobs_ref.json");
  return json::parse(in).at("cases");
}

TEST_F(GatewayTest, EchoWithLogprobsScoresThePromptAsTheReferenceDoes) {
  LG_REQUIRE_STORIES260K();  // its reference logprobs
  for (const json& c : reference_cases()) {
    const std::string adapter = c.at("adapter");
    json body = {{"model", adapter.empty() ? kServed : adapter},
                 {"prompt", c.at("ids")},
                 {"echo", true},
                 {"logprobs", 2},
                 {"max_tokens", 0}};
    ClientResponse r = post("/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json choice = r.json()["choices"][0];
    const json& lp = choice["logprobs"];
    const json& want = c.at("logprobs");
    ASSERT_EQ(lp["token_logprobs"].size(), want.size() + 1) << "one per prompt token";
    EXPECT_TRUE(lp["token_logprobs"][0].is_null()) << "nothing predicts the first token";
    EXPECT_TRUE(lp["top_logprobs"][0].is_null());
    double worst = 0;
    for (size_t k = 0; k < want.size(); ++k) {
      worst = std::max(worst, std::fabs(lp["token_logprobs"][k + 1].get<double>() - want[k].get<double>()));
      EXPECT_EQ(lp["top_logprobs"][k + 1].size(), 2u);
    }
    EXPECT_LT(worst, 1e-4) << "adapter '" << adapter << "'";
    EXPECT_EQ(r.json()["usage"]["completion_tokens"], 0);
    EXPECT_EQ(choice["finish_reason"], "length");
    EXPECT_EQ(lp["tokens"].size(), c.at("ids").size());
  }
}

TEST_F(GatewayTest, VllmPromptLogprobsAndEchoWithGeneration) {
  LG_REQUIRE_STORIES260K();  // its reference logprobs
  const json c = reference_cases()[0];
  json body = {{"model", kServed}, {"prompt", kGoldenPrompt}, {"prompt_logprobs", 1}, {"max_tokens", 8},
               {"temperature", 0}, {"echo", true}};
  ClientResponse r = post("/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = r.json()["choices"][0];
  const std::string text = choice["text"];
  EXPECT_EQ(text.rfind(kGoldenPrompt, 0), 0u) << "echo puts the prompt first: " << text;
  EXPECT_EQ(text.substr(std::string(kGoldenPrompt).size()), golden_text("base").substr(0, text.size() - 16));
  const json& p = choice["prompt_logprobs"];
  ASSERT_EQ(p.size(), 5u) << p.dump();  // BOS + 4 tokens of "Once upon a time"
  EXPECT_TRUE(p[0].is_null());
  const std::vector<int> ids = c.at("ids").get<std::vector<int>>();
  for (size_t i = 1; i < p.size(); ++i) {
    const std::string id = std::to_string(ids[i]);
    ASSERT_TRUE(p[i].contains(id)) << p[i].dump();
    EXPECT_NEAR(p[i][id]["logprob"].get<double>(), c.at("logprobs")[i - 1].get<double>(), 1e-4);
    EXPECT_GE(p[i][id]["rank"].get<int>(), 1);
    EXPECT_TRUE(p[i][id].contains("decoded_token"));
  }
  EXPECT_EQ(post("/v1/completions", {{"prompt", "x"}, {"prompt_logprobs", 1}, {"stream", true}}).status, 400);
}

TEST_F(GatewayTest, EveryAnswerNamesItsBase) {
  const std::string fingerprint = bases_->serving()->fingerprint();
  ClientResponse r = post("/v1/completions", greedy("a", 4));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["system_fingerprint"], fingerprint);
  EXPECT_EQ(r.headers["X-Base"], kServed);
  ClientResponse chat = post("/v1/chat/completions",
                             {{"model", "b"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 3}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(chat.json()["system_fingerprint"], fingerprint);
  json stream = greedy("c", 3);
  stream["stream"] = true;
  ClientResponse s = post("/v1/completions", stream);
  ASSERT_EQ(s.status, 200);
  EXPECT_EQ(s.headers["X-Base"], kServed);
  EXPECT_NE(s.body.find("\"system_fingerprint\":\"" + fingerprint + "\""), std::string::npos) << s.body;
}

TEST_F(GatewayTest, XBaseNeedsTheAdminTokenAndALoadedBase) {
  ClientResponse no_token = post("/v1/completions", greedy(kServed, 2), {{"X-Base", kServed}});
  EXPECT_EQ(no_token.status, 403) << "no admin token configured: " << no_token.body;
  gateway_.reset();
  GatewayOptions options;
  options.server.port = 0;
  options.served_model_name = kServed;
  options.admin_token = "secret";
  options.log_requests = false;
  auto gw = Gateway::create(options, bases_, &resolver_);
  ASSERT_TRUE(gw.is_ok());
  gateway_ = std::move(gw).value();
  port_ = gateway_->start().value();
  EXPECT_EQ(post("/v1/completions", greedy(kServed, 2), {{"X-Base", kServed}}).status, 401);
  const std::map<std::string, std::string> admin = {{"X-Base", kServed}, {"Authorization", "Bearer secret"}};
  ClientResponse ok = post("/v1/completions", greedy("a", 2), admin);
  EXPECT_EQ(ok.status, 200) << ok.body;
  ClientResponse missing = post("/v1/completions", greedy(kServed, 2),
                                {{"X-Base", "nope"}, {"Authorization", "Bearer secret"}});
  EXPECT_EQ(missing.status, 404) << missing.body;
  EXPECT_EQ(missing.json()["error"]["param"], "X-Base");
}

TEST_F(GatewayTest, ChatPromptThatFillsTheContextIsRefusedWithTheLengths) {
  std::string long_text;
  for (int i = 0; i < 400; ++i) long_text += "Once upon a time ";
  ClientResponse r = post("/v1/chat/completions", {{"model", kServed}, {"messages", {{{"role", "user"}, {"content", long_text}}}}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("512"), std::string::npos) << r.body;
  EXPECT_EQ(r.json()["error"]["param"], "messages");
}

}  // namespace
}  // namespace loragate::testing
