// vLLM's /tokenize and /detokenize on a real server: the ids are the ones the
// generation routes run (the golden prompt ids, the chat prompt
// /v1/chat/completions counts), text round-trips, add_special_tokens adds BOS,
// token_strs are the vocabulary pieces, `model`/`scenario` resolve (and fail)
// as on the completion routes, and malformed bodies get 400s naming the field.
#include <string>
#include <vector>

#include "gateway/openai/openai_tokenize.h"
#include "tests/gateway/gateway_fixture.h"

namespace loragate::testing {
namespace {

using nlohmann::json;

class TokenizeRouteTest : public GatewayTest {
 protected:
  // POST by default; GET sends the same JSON body.
  ClientResponse call_tokenizer(const std::string& target, const json& body, http::verb verb = http::verb::post) {
    return http_call(port_, verb, target, body.dump());
  }
  // /tokenize's ids for `body`, asserting a 200.
  std::vector<int32_t> ids_of(const json& body) {
    ClientResponse r = call_tokenizer("/tokenize", body);
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return {};
    return r.json()["tokens"].get<std::vector<int32_t>>();
  }
  std::string text_of(const std::vector<int32_t>& ids) {
    ClientResponse r = call_tokenizer("/detokenize", {{"tokens", ids}});
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? r.json()["prompt"].get<std::string>() : "";
  }
  // Restarts the gateway taking bodies of up to 1 MiB.
  void allow_large_bodies() {
    ServerOptions server;
    server.port = 0;
    server.read_timeout = std::chrono::milliseconds(2000);
    server.idle_timeout = std::chrono::milliseconds(2000);
    server.max_body_bytes = 1u << 20;
    start(server);
  }
  static const Tokenizer& tokenizer() { return *bases_->serving()->tokenizer(); }
  static json tokenize_chat_messages() {
    return json::array({{{"role", "system"}, {"content", "You tell stories."}},
                        {{"role", "user"}, {"content", "Tell me about a cat."}}});
  }
  // The 400 (or other status) `body` gets on `target`, and the param it names.
  void expect_refused(const std::string& target, const json& body, const std::string& param, int status = 400) {
    ClientResponse r = call_tokenizer(target, body);
    EXPECT_EQ(r.status, status) << body.dump() << " -> " << r.body;
    const json j = r.json();
    ASSERT_TRUE(j.contains("error")) << r.body;
    EXPECT_EQ(j["error"]["type"], "invalid_request_error") << r.body;
    if (param.empty()) {
      EXPECT_TRUE(j["error"]["param"].is_null()) << r.body;
    } else {
      EXPECT_EQ(j["error"]["param"], param) << body.dump() << " -> " << r.body;
    }
  }
};

TEST_F(TokenizeRouteTest, TextGivesTheIdsTheCompletionRoutesRun) {
  ClientResponse r = call_tokenizer("/tokenize", {{"prompt", kGoldenPrompt}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.json();
  const json& golden_ids = (*golden_)["cases"][0]["prompt_ids"];
  EXPECT_EQ(j["tokens"], golden_ids);
  EXPECT_EQ(j["count"], golden_ids.size());
  EXPECT_EQ(j["max_model_len"], bases_->serving()->max_model_len());
  EXPECT_FALSE(j.contains("token_strs")) << "token_strs only when asked";

  // echo shows what /v1/completions ran: its usage counts the same ids.
  ClientResponse completion = post("/v1/completions", greedy(kServed, 1));
  ASSERT_EQ(completion.status, 200) << completion.body;
  EXPECT_EQ(completion.json()["usage"]["prompt_tokens"], golden_ids.size());
}

TEST_F(TokenizeRouteTest, TextRoundTripsThroughDetokenize) {
  for (const std::string& text : {std::string(kGoldenPrompt), std::string("Tom and Lily went to the park.\nThey ran."),
                                 std::string("")}) {
    const std::vector<int32_t> ids = ids_of({{"prompt", text}, {"add_special_tokens", false}});
    EXPECT_EQ(text_of(ids), text);
  }
  // Special tokens stay in the decoded text (vLLM decodes as HF's decode does by default).
  const std::vector<int32_t> with_bos = ids_of({{"prompt", kGoldenPrompt}});
  ASSERT_FALSE(with_bos.empty());
  const std::string bos = tokenizer().id_to_token(with_bos[0]);
  EXPECT_EQ(text_of(with_bos).rfind(bos, 0), 0u) << text_of(with_bos);
  EXPECT_EQ(text_of({}), "");
}

TEST_F(TokenizeRouteTest, AddSpecialTokensDecidesTheBos) {
  const std::vector<int32_t> with = ids_of({{"prompt", kGoldenPrompt}});
  const std::vector<int32_t> without = ids_of({{"prompt", kGoldenPrompt}, {"add_special_tokens", false}});
  ASSERT_EQ(with.size(), without.size() + 1);
  ASSERT_TRUE(tokenizer().bos_id().has_value());
  EXPECT_EQ(with[0], *tokenizer().bos_id());
  EXPECT_EQ(std::vector<int32_t>(with.begin() + 1, with.end()), without);
  EXPECT_EQ(ids_of({{"prompt", ""}}), std::vector<int32_t>{*tokenizer().bos_id()});
}

TEST_F(TokenizeRouteTest, TokenStrsAreTheVocabularyPieces) {
  ClientResponse r = call_tokenizer("/tokenize", {{"prompt", kGoldenPrompt}, {"return_token_strs", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.json();
  ASSERT_EQ(j["token_strs"].size(), j["tokens"].size());
  for (size_t i = 0; i < j["tokens"].size(); ++i) {
    EXPECT_EQ(j["token_strs"][i], tokenizer().id_to_token(j["tokens"][i].get<int32_t>())) << i;
  }
  EXPECT_EQ(j["token_strs"][0], "<s>");
}

TEST_F(TokenizeRouteTest, ChatFormGivesTheIdsChatCompletionsRuns) {
  const json messages = tokenize_chat_messages();
  const std::vector<int32_t> ids = ids_of({{"messages", messages}});
  // The same rendering, done here: template with the generation prompt, no added specials.
  Result<std::string> rendered = bases_->serving()->chat_template().render(messages, true);
  ASSERT_TRUE(rendered.is_ok()) << rendered.status().to_string();
  EXPECT_EQ(ids, tokenizer().encode(rendered.value(), /*add_special_tokens=*/false));

  ClientResponse chat = post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 1}, {"temperature", 0}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(chat.json()["usage"]["prompt_tokens"], ids.size());

  // add_generation_prompt and add_special_tokens change the ids as they say.
  const std::vector<int32_t> no_generation_prompt = ids_of({{"messages", messages}, {"add_generation_prompt", false}});
  Result<std::string> bare = bases_->serving()->chat_template().render(messages, false);
  ASSERT_TRUE(bare.is_ok());
  EXPECT_EQ(no_generation_prompt, tokenizer().encode(bare.value(), false));
  EXPECT_NE(no_generation_prompt, ids);
  const std::vector<int32_t> with_specials = ids_of({{"messages", messages}, {"add_special_tokens", true}});
  EXPECT_EQ(with_specials, tokenizer().encode(rendered.value(), true));
  EXPECT_EQ(with_specials.size(), ids.size() + 1);
}

TEST_F(TokenizeRouteTest, GetTakesTheSameJsonBody) {
  const json body = {{"prompt", kGoldenPrompt}};
  ClientResponse get = call_tokenizer("/tokenize", body, http::verb::get);
  ASSERT_EQ(get.status, 200) << get.body;
  EXPECT_EQ(get.json()["tokens"], (*golden_)["cases"][0]["prompt_ids"]);
  ClientResponse detok =
      call_tokenizer("/detokenize", {{"tokens", get.json()["tokens"]}}, http::verb::get);
  ASSERT_EQ(detok.status, 200) << detok.body;
  EXPECT_EQ(detok.json()["prompt"], text_of(get.json()["tokens"].get<std::vector<int32_t>>()));
  EXPECT_EQ(http_call(port_, http::verb::delete_, "/tokenize").status, 405);
}

TEST_F(TokenizeRouteTest, ModelAndScenarioResolveAsOnTheCompletionRoutes) {
  const json golden_ids = (*golden_)["cases"][0]["prompt_ids"];
  for (const std::string& model : {std::string(kServed), std::string("a"), std::string("")}) {
    ClientResponse r = call_tokenizer("/tokenize", {{"model", model}, {"prompt", kGoldenPrompt}});
    ASSERT_EQ(r.status, 200) << model << ": " << r.body;
    EXPECT_EQ(r.json()["tokens"], golden_ids) << model;
  }
  resolver_.set("tok-scenario", "b");
  ClientResponse routed = call_tokenizer("/tokenize", {{"scenario", "tok-scenario"}, {"prompt", kGoldenPrompt}});
  EXPECT_EQ(routed.status, 200) << routed.body;

  // An unknown model: the very error /v1/completions gives.
  ClientResponse completion = post("/v1/completions", {{"model", "no-such-adapter"}, {"prompt", "x"}});
  ASSERT_EQ(completion.status, 404);
  for (const std::string target : {"/tokenize", "/detokenize"}) {
    ClientResponse r =
        call_tokenizer(target, {{"model", "no-such-adapter"}, {"prompt", "x"}, {"tokens", json::array({1})}});
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_EQ(r.json()["error"], completion.json()["error"]) << target << ": " << r.body;
  }
  expect_refused("/tokenize", {{"scenario", "no-such-scenario"}, {"prompt", "x"}}, "scenario", 404);
  expect_refused("/detokenize", {{"model", 7}, {"tokens", json::array({1})}}, "model");
}

TEST_F(TokenizeRouteTest, TokenizeRefusesMalformedBodiesNamingTheField) {
  ClientResponse bad_json = http_call(port_, http::verb::post, "/tokenize", "{\"prompt\": ");
  EXPECT_EQ(bad_json.status, 400) << bad_json.body;
  EXPECT_NE(bad_json.body.find("invalid JSON"), std::string::npos) << bad_json.body;
  expect_refused("/tokenize", json::array({"x"}), "");
  expect_refused("/tokenize", json::object(), "prompt");
  expect_refused("/tokenize", {{"prompt", 5}}, "prompt");
  expect_refused("/tokenize", {{"prompt", json::array({"x"})}}, "prompt");
  expect_refused("/tokenize", {{"prompt", "x"}, {"messages", tokenize_chat_messages()}}, "messages");
  expect_refused("/tokenize", {{"prompt", "x"}, {"add_special_tokens", "yes"}}, "add_special_tokens");
  expect_refused("/tokenize", {{"prompt", "x"}, {"return_token_strs", 1}}, "return_token_strs");
  expect_refused("/tokenize", {{"messages", json::array()}}, "messages");
  expect_refused("/tokenize", {{"messages", json::array({{{"role", "wizard"}, {"content", "x"}}})}}, "messages");
  expect_refused("/tokenize", {{"messages", tokenize_chat_messages()}, {"add_generation_prompt", "no"}},
                 "add_generation_prompt");
  expect_refused("/tokenize", {{"messages", tokenize_chat_messages()}, {"continue_final_message", true}},
                 "continue_final_message");
  expect_refused("/tokenize", {{"messages", tokenize_chat_messages()}, {"chat_template_kwargs", 3}},
                 "chat_template_kwargs");
  // Fields of the generation routes are not read here: a completion body tokenises as is.
  EXPECT_EQ(call_tokenizer("/tokenize", {{"prompt", "x"}, {"logit_bias", {{"5", 1}}}, {"n", 3}}).status, 200);
}

TEST_F(TokenizeRouteTest, DetokenizeRefusesIdsOutsideTheVocabularyAndWrongTypes) {
  const int32_t vocab = tokenizer().vocab_size();
  EXPECT_EQ(call_tokenizer("/detokenize", {{"tokens", json::array({0, vocab - 1})}}).status, 200) << "the last id is in";
  expect_refused("/detokenize", json::object(), "tokens");
  expect_refused("/detokenize", {{"tokens", "1 2 3"}}, "tokens");
  expect_refused("/detokenize", {{"tokens", json::array({1, "2"})}}, "tokens");
  expect_refused("/detokenize", {{"tokens", json::array({1, 2.5})}}, "tokens");
  expect_refused("/detokenize", {{"tokens", json::array({json::array({1})})}}, "tokens");
  expect_refused("/detokenize", {{"tokens", json::array({-1})}}, "tokens");
  expect_refused("/detokenize", {{"tokens", json::array({1, vocab})}}, "tokens");
  expect_refused("/detokenize", {{"tokens", json::array({uint64_t{1} << 63})}}, "tokens");
  ClientResponse r = call_tokenizer("/detokenize", {{"tokens", json::array({1, vocab})}});
  EXPECT_NE(r.body.find("tokens[1]"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("vocabulary"), std::string::npos) << r.body;
}

TEST_F(TokenizeRouteTest, LargeBodiesWorkOffTheNetworkThreadAndTheIdCountIsBounded) {
  allow_large_bodies();
  // Past the on-strand threshold, and longer than the model: vLLM counts it all.
  std::string text;
  while (text.size() <= kOnStrandTextBytes + 1000) text += "Once upon a time there was a cat. ";
  ClientResponse r = call_tokenizer("/tokenize", {{"prompt", text}, {"add_special_tokens", false}});
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
  const std::vector<int32_t> ids = r.json()["tokens"].get<std::vector<int32_t>>();
  EXPECT_GT(static_cast<int64_t>(ids.size()), bases_->serving()->max_model_len());
  EXPECT_EQ(r.json()["count"], ids.size());
  EXPECT_EQ(text_of(ids), text);

  const std::vector<int32_t> too_many(kMaxDetokenizeTokens + 1, 1);
  expect_refused("/detokenize", {{"tokens", too_many}}, "tokens");
  const std::vector<int32_t> most(kMaxDetokenizeTokens, 1);
  ClientResponse at_cap = call_tokenizer("/detokenize", {{"tokens", most}});
  EXPECT_EQ(at_cap.status, 200) << at_cap.body.substr(0, 300);
}

}  // namespace
}  // namespace loragate::testing
