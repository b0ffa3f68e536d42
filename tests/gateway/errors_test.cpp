// Bad input over the wire: every case gets an OpenAI-shaped error with the
// right status and, where there is one, the field at fault; nothing crashes.
#include "tests/gateway/gateway_fixture.h"

namespace loragate::testing {
namespace {

using nlohmann::json;

TEST_F(GatewayTest, InvalidJsonSaysWhereParsingFailed) {
  ClientResponse r = http_call(port_, http::verb::post, "/v1/completions", "{\"prompt\": \"x\",, }");
  ASSERT_EQ(r.status, 400) << r.error;
  json j = r.json();
  const std::string message = j["error"]["message"];
  EXPECT_NE(message.find("invalid JSON"), std::string::npos) << message;
  EXPECT_NE(message.find("column"), std::string::npos) << message;
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(j["error"].contains("param"));
  EXPECT_TRUE(j["error"].contains("code"));

  r = http_call(port_, http::verb::post, "/v1/completions", "[1, 2]");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("JSON object"), std::string::npos);
  r = http_call(port_, http::verb::post, "/v1/completions", "");
  EXPECT_EQ(r.status, 400);
  r = http_call(port_, http::verb::post, "/v1/completions", std::string("{\"prompt\": \"\xff\xfe\"}"));
  EXPECT_EQ(r.status, 400);  // invalid UTF-8 in a string
}

TEST_F(GatewayTest, WrongTypesNameTheField) {
  struct Case {
    json patch;
    std::string param;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{{"max_tokens", "many"}}, "max_tokens", "max_tokens must be a non-negative integer"},
      {{{"max_tokens", -1}}, "max_tokens", "max_tokens must be a non-negative integer"},
      {{{"max_tokens", 1.5}}, "max_tokens", "max_tokens"},
      {{{"temperature", "hot"}}, "temperature", "temperature must be a number"},
      {{{"temperature", -0.5}}, "temperature", "temperature must be >= 0"},
      {{{"top_p", 0}}, "top_p", "top_p"},
      {{{"top_k", "x"}}, "top_k", "top_k"},
      {{{"seed", "x"}}, "seed", "seed"},
      {{{"stop", 7}}, "stop", "stop must be"},
      {{{"stop", {"a", "b", "c", "d", "e"}}}, "stop", "at most 4"},
      {{{"stream", "yes"}}, "stream", "stream must be a boolean"},
      {{{"model", 5}}, "model", "model must be a string"},
      {{{"n", 17}}, "n", "n must be an integer from 1 to 16"},
      {{{"logprobs", 21}}, "logprobs", "logprobs must be an integer from 0 to 20"},
      {{{"logprobs", 2}, {"stream", true}}, "logprobs", "logprobs with stream is not supported yet"},
      {{{"echo", true}, {"stream", true}}, "echo", "echo with stream is not supported yet"},
      {{{"echo", "yes"}}, "echo", "echo must be a boolean"},
      {{{"prompt_logprobs", 21}}, "prompt_logprobs", "prompt_logprobs must be an integer from 0 to 20"},
      {{{"presence_penalty", 2.5}}, "presence_penalty", "presence_penalty must be in [-2, 2]"},
      {{{"frequency_penalty", "x"}}, "frequency_penalty", "frequency_penalty must be a number"},
      {{{"repetition_penalty", 0}}, "repetition_penalty", "repetition_penalty must be a finite number > 0"},
      {{{"logit_bias", {1, 2}}}, "logit_bias", "logit_bias must be an object"},
      {{{"logit_bias", {{"x", 1}}}}, "logit_bias", "keys must be token ids"},
      {{{"logit_bias", {{"5", 101}}}}, "logit_bias", "[-100, 100]"},
      {{{"logit_bias", {{"5", "up"}}}}, "logit_bias", "values must be numbers"},
      {{{"min_tokens", -1}}, "min_tokens", "min_tokens must be a non-negative integer"},
      {{{"min_tokens", 5}}, "min_tokens", "min_tokens must be in [0, max_tokens = 4]"},
      {{{"prompt", 5}}, "prompt", "prompt must be"},
      {{{"prompt", {1, "two"}}}, "prompt", "prompt must be"},
      {{{"prompt", nullptr}}, "prompt", "prompt is required"},
  };
  for (const Case& c : cases) {
    json body = greedy(kServed, 4);
    body.update(c.patch);
    if (c.patch.contains("prompt") && c.patch["prompt"].is_null()) body.erase("prompt");
    ClientResponse r = post("/v1/completions", body);
    EXPECT_EQ(r.status, 400) << c.patch.dump() << " -> " << r.body;
    json j = r.json();
    EXPECT_EQ(j["error"]["param"], c.param) << c.patch.dump();
    EXPECT_NE(r.body.find(c.needle), std::string::npos) << c.patch.dump() << " -> " << r.body;
  }
}

TEST_F(GatewayTest, NumbersOutOfDoubleRangeAreA400) {
  // nlohmann throws out_of_range, not parse_error, for 1e400: it was a 500.
  ClientResponse r = http_call(port_, http::verb::post, "/v1/completions",
                               R"({"model": "stories", "prompt": "x", "max_tokens": 1e400})",
                               {{"Content-Type", "application/json"}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("invalid JSON body"), std::string::npos) << r.body;
}

TEST_F(GatewayTest, EngineLimitsAndUnknownFields) {
  json body = greedy(kServed, 10000);  // prompt + max_tokens beyond the model's 512
  ClientResponse r = post("/v1/completions", body);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("exceeds the model length"), std::string::npos);

  body = greedy(kServed, 4);
  body["prompt"] = json::array({1, 600});  // outside the vocabulary
  EXPECT_EQ(post("/v1/completions", body).status, 400);

  body = greedy(kServed, 4);
  body["frobnicate"] = {{"x", 1}};  // unknown fields are ignored, as vLLM does
  body["user"] = "someone";
  body["n"] = 1;
  body["logprobs"] = nullptr;
  body["max_tokens"] = 4.0;
  EXPECT_EQ(post("/v1/completions", body).status, 200);
}

TEST_F(GatewayTest, UnknownModelRouteAndMethod) {
  ClientResponse r = post("/v1/completions", greedy("gpt-9"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.json()["error"]["param"], "model");
  EXPECT_EQ(r.json()["error"]["code"], "model_not_found");

  r = http_call(port_, http::verb::get, "/v2/nothing");
  EXPECT_EQ(r.status, 404);
  EXPECT_TRUE(r.json()["error"].is_object());

  r = http_call(port_, http::verb::get, "/v1/completions");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers["Allow"], "POST");
  EXPECT_TRUE(r.json()["error"].is_object());
  r = http_call(port_, http::verb::delete_, "/v1/models?x=1");
  EXPECT_EQ(r.status, 405);
}

// An adapter whose files are gone: any client may ask for it, so the answer
// names the adapter and says to retry, but never shows the server's paths.
TEST_F(GatewayTest, AnAdapterWhoseFilesVanishedIsA503WithoutItsPath) {
  const std::string dir = make_temp_dir("lg-vanished") + "/gone";  // never created
  ASSERT_TRUE(bases_->serving()->adapters()->add("vanished", dir).is_ok());
  for (int attempt = 0; attempt < 2; ++attempt) {  // the load fails, then the backoff answers
    SCOPED_TRACE(attempt);
    ClientResponse r = post("/v1/completions", greedy("vanished", 4));
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("adapter 'vanished'"), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find(dir), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find("/tmp"), std::string::npos) << r.body;
  }
  ASSERT_TRUE(bases_->serving()->adapters()->remove("vanished").is_ok());
}

TEST_F(GatewayTest, HugeBodyGets413AndHugeHeaders431) {
  json body = greedy(kServed, 4);
  body["prompt"] = std::string(200u << 10, 'x');  // over the 64 KiB limit of this fixture
  ClientResponse r = post("/v1/completions", body);
  EXPECT_EQ(r.status, 413) << r.error;
  EXPECT_NE(r.body.find("exceeds the limit"), std::string::npos);

  r = post("/v1/completions", greedy(kServed, 4), {{"X-Padding", std::string(16u << 10, 'p')}});
  EXPECT_EQ(r.status, 431) << r.error;

  TestConnection conn(port_);
  ASSERT_TRUE(conn.write_raw("THIS IS NOT HTTP\r\n\r\n"));
  auto [data, closed] = conn.read_until_closed(std::chrono::seconds(3));
  EXPECT_NE(data.find("400 Bad Request"), std::string::npos) << data;
  EXPECT_TRUE(closed);

  // The server still serves.
  EXPECT_EQ(http_call(port_, http::verb::get, "/health").status, 200);
}

TEST_F(GatewayTest, TooManyInFlightGets429) {
  ServerOptions server;
  server.port = 0;
  server.max_queued_requests = 1;
  start(server);
  json body = greedy(kServed, 400);
  body["ignore_eos"] = true;
  body["stream"] = true;
  TestConnection holder(port_);
  ClientResponse head = holder.send_and_read_header(http::verb::post, "/v1/completions", body.dump());
  ASSERT_EQ(head.status, 200) << head.error;
  EXPECT_EQ(gateway_->in_flight(), 1u);
  ClientResponse r = post("/v1/completions", greedy(kServed, 4));
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(r.json()["error"]["type"], "rate_limit_error");
  EXPECT_EQ(r.json()["error"]["code"], "rate_limit_exceeded");
  holder.close();
  EXPECT_TRUE(engine_drained(std::chrono::seconds(1)));
}

}  // namespace
}  // namespace loragate::testing
