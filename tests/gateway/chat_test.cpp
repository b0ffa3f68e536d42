// /v1/chat/completions on stories260K (no chat_template: the plain fallback).
#include "tests/gateway/gateway_fixture.h"

namespace loragate::testing {
namespace {

using nlohmann::json;

json chat_body(const std::string& model, int max_tokens = 16) {
  return {{"model", model},
          {"messages", json::array({{{"role", "system"}, {"content", "You tell stories."}},
                                    {{"role", "user"}, {"content", "Tell me about a cat."}}})},
          {"max_tokens", max_tokens},
          {"temperature", 0}};
}

TEST_F(GatewayTest, ChatReturnsAnAssistantMessage) {
  ClientResponse r = post("/v1/chat/completions", chat_body("a"));
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  json j = r.json();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["model"], "a");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(j["choices"][0]["message"]["content"].is_string());
  EXPECT_LE(j["usage"]["completion_tokens"].get<int>(), 16);
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 5);
}

TEST_F(GatewayTest, ChatStreamStartsWithTheRoleAndEndsWithDone) {
  json body = chat_body(kServed);
  ClientResponse whole = post("/v1/chat/completions", body);
  ASSERT_EQ(whole.status, 200);
  body["stream"] = true;
  ClientResponse r = post("/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<std::string> events = sse_events(r.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  json first = json::parse(events.front());
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  json last;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    last = json::parse(events[i]);
    text += last["choices"][0]["delta"].value("content", "");
  }
  EXPECT_FALSE(last["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(text, whole.json()["choices"][0]["message"]["content"]);
}

TEST_F(GatewayTest, ChatAcceptsTextPartsAndTemplateKwargs) {
  json body = chat_body(kServed);
  body["messages"] = json::array({{{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "Hi"}}})}}});
  body["chat_template_kwargs"] = {{"enable_thinking", false}};
  ClientResponse r = post("/v1/chat/completions", body);
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(GatewayTest, ChatRefusesMalformedMessages) {
  auto expect_400 = [&](json messages, const std::string& needle) {
    json body = chat_body(kServed);
    body["messages"] = std::move(messages);
    ClientResponse r = post("/v1/chat/completions", body);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find(needle), std::string::npos) << r.body;
    EXPECT_EQ(r.json()["error"]["type"], "invalid_request_error");
  };
  expect_400(json::array({{{"role", "wizard"}, {"content", "x"}}}), "messages[0].role");
  expect_400(json::array({{{"role", 3}, {"content", "x"}}}), "messages[0].role must be a string");
  expect_400(json::array({{{"role", "user"}, {"content", "ok"}}, {{"role", "user"}, {"content", 5}}}),
             "messages[1].content");
  expect_400(json::array(), "non-empty");
  expect_400("hello", "non-empty list");
  expect_400(json::array({{{"role", "user"}, {"content", json::array({{{"type", "image_url"}}})}}}), "text parts");
  // A non-string type was a 500 (json::value threw).
  expect_400(json::array({{{"role", "user"}, {"content", json::array({{{"type", 7}, {"text", "x"}}})}}}), "text parts");

  json body = chat_body(kServed);
  body["top_logprobs"] = 2;  // without logprobs: true
  EXPECT_EQ(post("/v1/chat/completions", body).json()["error"]["param"], "top_logprobs");
  body["logprobs"] = true;
  body["stream"] = true;
  EXPECT_EQ(post("/v1/chat/completions", body).json()["error"]["param"], "logprobs");
  body = chat_body(kServed);
  body["response_format"] = {{"type", 3}};
  ClientResponse rf = post("/v1/chat/completions", body);
  EXPECT_EQ(rf.status, 400) << rf.body;
  EXPECT_EQ(rf.json()["error"]["param"], "response_format");
  body = chat_body(kServed);
  body["chat_template_kwargs"] = "no";
  EXPECT_EQ(post("/v1/chat/completions", body).json()["error"]["param"], "chat_template_kwargs");
}

TEST_F(GatewayTest, ChatLogprobsListEachToken) {
  json body = chat_body(kServed);
  body["max_tokens"] = 6;
  body["temperature"] = 0;
  body["logprobs"] = true;
  body["top_logprobs"] = 2;
  ClientResponse r = post("/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = r.json()["choices"][0];
  const json& content = choice["logprobs"]["content"];
  ASSERT_EQ(content.size(), 6u);
  std::string joined;
  for (const json& t : content) {
    joined += t["token"].get<std::string>();
    EXPECT_EQ(t["bytes"].size(), t["token"].get<std::string>().size());
    ASSERT_EQ(t["top_logprobs"].size(), 2u);
    EXPECT_DOUBLE_EQ(t["top_logprobs"][0]["logprob"].get<double>(), t["logprob"].get<double>());
  }
  EXPECT_EQ(joined, choice["message"]["content"]);
}

}  // namespace
}  // namespace loragate::testing
