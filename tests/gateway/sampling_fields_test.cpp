// presence/frequency/repetition penalties, logit_bias and min_tokens through
// /v1/completions and /v1/chat/completions on a real server: they reach the
// engine and change what is drawn, and the logprobs reported stay the model's.
#include <gtest/gtest.h>

#include <cctype>
#include <set>

#include "tests/gateway/gateway_fixture.h"

namespace loragate::testing {
namespace {

using nlohmann::json;

class SamplingFieldsTest : public GatewayTest {};

std::vector<std::string> logprob_tokens(const json& completion) {
  return completion["choices"][0]["logprobs"]["tokens"].get<std::vector<std::string>>();
}

TEST_F(SamplingFieldsTest, LogitBiasForcesATokenOnBothRoutes) {
  json body = greedy(kServed, 6);
  body["logprobs"] = 0;
  const ClientResponse plain = post("/v1/completions", body);
  ASSERT_EQ(plain.status, 200) << plain.body;
  body["logit_bias"] = {{"42", 100}};
  const ClientResponse forced = post("/v1/completions", body);
  ASSERT_EQ(forced.status, 200) << forced.body;
  const std::vector<std::string> tokens = logprob_tokens(forced.json());
  ASSERT_EQ(tokens.size(), 6u);
  EXPECT_EQ(std::set<std::string>(tokens.begin(), tokens.end()).size(), 1u) << forced.body;
  // The reported logprob is the model's own, not that of the forced distribution (which is 0).
  EXPECT_LT(forced.json()["choices"][0]["logprobs"]["token_logprobs"][0].get<double>(), -0.01);

  json chat = {{"model", kServed}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 4},
               {"temperature", 0}, {"logit_bias", {{"42", 100}}}};
  const ClientResponse chat_forced = post("/v1/chat/completions", chat);
  ASSERT_EQ(chat_forced.status, 200) << chat_forced.body;
  EXPECT_EQ(chat_forced.json()["usage"]["completion_tokens"], 4);
}

TEST_F(SamplingFieldsTest, PenaltiesChangeTheText) {
  json body = greedy(kServed, 64);
  const ClientResponse plain = post("/v1/completions", body);
  ASSERT_EQ(plain.status, 200) << plain.body;
  body["frequency_penalty"] = 1.5;
  body["presence_penalty"] = 0.5;
  const ClientResponse penalised = post("/v1/completions", body);
  ASSERT_EQ(penalised.status, 200) << penalised.body;
  EXPECT_NE(penalised.json()["choices"][0]["text"], plain.json()["choices"][0]["text"]);
  body.erase("frequency_penalty");
  body.erase("presence_penalty");
  body["repetition_penalty"] = 1.5;
  const ClientResponse repeated = post("/v1/completions", body);
  ASSERT_EQ(repeated.status, 200) << repeated.body;
  EXPECT_NE(repeated.json()["choices"][0]["text"], plain.json()["choices"][0]["text"]);
  // Neutral values change nothing.
  body["repetition_penalty"] = 1.0;
  body["presence_penalty"] = 0;
  body["logit_bias"] = json::object();
  EXPECT_EQ(post("/v1/completions", body).json()["choices"][0]["text"], plain.json()["choices"][0]["text"]);
}

TEST_F(SamplingFieldsTest, MinTokensHoldsAStopStringBack) {
  // The stop string is a piece of the model's own greedy text (the fixtures may be real or synthetic).
  json body = greedy(kServed, 40);
  const std::string plain = post("/v1/completions", body).json()["choices"][0]["text"].get<std::string>();
  // Two ASCII letters past the first few characters (synthetic weights also emit broken UTF-8).
  size_t at = 4;
  while (at + 1 < plain.size() && !(std::isalpha(static_cast<unsigned char>(plain[at])) &&
                                    std::isalpha(static_cast<unsigned char>(plain[at + 1])))) {
    ++at;
  }
  if (at + 1 >= plain.size()) GTEST_SKIP() << "no two letters in a row to stop on: " << plain;
  const std::string stop = plain.substr(at, 2);
  body["stop"] = stop;
  const ClientResponse stopped = post("/v1/completions", body);
  ASSERT_EQ(stopped.status, 200) << stopped.body;
  ASSERT_EQ(stopped.json()["choices"][0]["finish_reason"], "stop") << stopped.body;
  const int used = stopped.json()["usage"]["completion_tokens"].get<int>();
  body["min_tokens"] = used + 1;
  const ClientResponse held = post("/v1/completions", body);
  ASSERT_EQ(held.status, 200) << held.body;
  EXPECT_NE(held.json()["choices"][0]["text"].get<std::string>().find(stop), std::string::npos) << held.body;
  EXPECT_GT(held.json()["usage"]["completion_tokens"].get<int>(), used);
}

TEST_F(SamplingFieldsTest, ALogitBiasIdOutsideTheVocabularyIsA400) {
  json body = greedy(kServed, 4);
  body["logit_bias"] = {{"600", 5}};
  const ClientResponse r = post("/v1/completions", body);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("logit_bias token id 600"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace loragate::testing
