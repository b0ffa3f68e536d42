// Tool calls on /v1/chat/completions through a real server, on a model whose
// chat template knows nothing of tools: a named tool_choice and "required"
// give calls whose arguments follow the function's schema (OpenAI's
// message.tool_calls, finish_reason "tool_calls"), streamed as
// delta.tool_calls fragments that add up to the same call; "auto" reads
// Hermes and Llama 3 calls back out of the output (forced here with a
// regex, since the model's weights would not write one); bad tools and
// tool_choice values are 400s naming the field.
#include <gtest/gtest.h>

#include "tests/gateway/gateway_fixture.h"

namespace loragate::testing {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

const ojson& weather_tool() {
  static const ojson t = ojson::parse(R"({"type": "function", "function": {"name": "get_weather",
      "description": "The weather in a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                                      "unit": {"enum": ["c", "f"]}},
                     "required": ["city", "unit"], "additionalProperties": false}}})");
  return t;
}

const ojson& add_tool() {
  // Its parameters refer to their own $defs: the refs must still resolve inside the calls' grammar.
  static const ojson t = ojson::parse(R"({"type": "function", "function": {"name": "add",
      "parameters": {"$defs": {"n": {"type": "integer", "minimum": -99, "maximum": 99}},
                     "type": "object", "properties": {"a": {"$ref": "#/$defs/n"}, "b": {"$ref": "#/$defs/n"}},
                     "required": ["a", "b"], "additionalProperties": false}}})");
  return t;
}

// The arguments of a call, checked against its function's schema by hand.
void expect_valid_arguments(const std::string& name, const std::string& arguments) {
  const json args = json::parse(arguments);  // throws, failing the test, if it does not parse
  ASSERT_TRUE(args.is_object()) << arguments;
  EXPECT_EQ(args.size(), 2u) << arguments;
  if (name == "get_weather") {
    EXPECT_TRUE(args["city"].is_string()) << arguments;
    EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << arguments;
  } else {
    ASSERT_EQ(name, "add");
    for (const char* k : {"a", "b"}) {
      EXPECT_TRUE(args[k].is_number_integer() && args[k] >= -99 && args[k] <= 99) << arguments;
    }
  }
}

class ToolsTest : public GatewayTest {
 protected:
  ojson chat_body(ojson extra, int seed = 1, int max_tokens = 200) {
    ojson body = {{"model", kServed},
                  {"messages", {{{"role", "user"}, {"content", "What is the weather in Oslo?"}}}},
                  {"max_tokens", max_tokens},
                  {"seed", seed},
                  {"tools", {weather_tool(), add_tool()}}};
    for (auto& [k, v] : extra.items()) body[k] = v;
    return body;
  }
  // Posts keeping the written key order (the arguments follow the schema's).
  ClientResponse post_chat(const ojson& body) {
    return http_call(port_, http::verb::post, "/v1/chat/completions", body.dump(),
                     {{"Content-Type", "application/json"}});
  }
  static ojson named(const std::string& function) {
    return {{"type", "function"}, {"function", {{"name", function}}}};
  }
  void expect_refused(const ojson& body, const std::string& param, const std::string& needle) {
    const ClientResponse r = post_chat(body);
    EXPECT_EQ(r.status, 400) << body.dump() << "\n" << r.body;
    EXPECT_EQ(r.json()["error"]["param"], param) << r.body;
    EXPECT_NE(r.json()["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
  }
};

TEST_F(ToolsTest, ANamedFunctionGivesOneCallWithValidArguments) {
  int finished = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    const ClientResponse r = post_chat(chat_body({{"tool_choice", named("get_weather")}}, seed));
    ASSERT_EQ(r.status, 200) << r.body;
    const json choice = r.json()["choices"][0];
    const json message = choice["message"];
    EXPECT_TRUE(message["content"].is_null()) << r.body;
    ASSERT_EQ(message["tool_calls"].size(), 1u) << r.body;
    const json& call = message["tool_calls"][0];
    EXPECT_EQ(call["type"], "function");
    EXPECT_TRUE(call["id"].get<std::string>().starts_with("call_")) << call;
    EXPECT_EQ(call["function"]["name"], "get_weather");
    if (choice["finish_reason"] == "length") continue;
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << r.body;
    const std::string arguments = call["function"]["arguments"].get<std::string>();
    expect_valid_arguments("get_weather", arguments);
    EXPECT_TRUE(arguments.starts_with("{\"city\":")) << "the schema's order, compact: " << arguments;
    ++finished;
  }
  EXPECT_GE(finished, 2);
}

TEST_F(ToolsTest, RequiredGivesCallsOfTheListedFunctions) {
  int calls = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    for (bool parallel : {false, true}) {
      const ClientResponse r =
          post_chat(chat_body({{"tool_choice", "required"}, {"parallel_tool_calls", parallel}}, seed, 300));
      ASSERT_EQ(r.status, 200) << r.body;
      const json choice = r.json()["choices"][0];
      if (choice["finish_reason"] == "length") continue;
      EXPECT_EQ(choice["finish_reason"], "tool_calls") << r.body;
      const json& tool_calls = choice["message"]["tool_calls"];
      ASSERT_GE(tool_calls.size(), 1u) << r.body;
      if (!parallel) {
        EXPECT_EQ(tool_calls.size(), 1u) << r.body;
      }
      std::set<std::string> ids;
      for (const json& call : tool_calls) {
        expect_valid_arguments(call["function"]["name"], call["function"]["arguments"]);
        ids.insert(call["id"].get<std::string>());
        ++calls;
      }
      EXPECT_EQ(ids.size(), tool_calls.size()) << "ids are unique in a response";
    }
  }
  EXPECT_GE(calls, 4);
}

// The stream's chunks, parsed.
std::vector<json> sse_chunks(const std::string& body) {
  std::vector<json> chunks;
  for (size_t at = body.find("data: {"); at != std::string::npos; at = body.find("data: {", at + 1)) {
    chunks.push_back(json::parse(body.substr(at + 6, body.find("\n\n", at) - at - 6)));
  }
  return chunks;
}

// Streamed calls folded as OpenAI's clients fold them: by index, the first
// fragment bringing id, type and name, the rest more arguments.
struct FoldedStream {
  json calls = json::array();
  std::string content;
  std::string finish_reason;
};
FoldedStream fold_stream(const std::string& body) {
  FoldedStream out;
  for (const json& chunk : sse_chunks(body)) {
    if (chunk["choices"].empty()) continue;
    const json& choice = chunk["choices"][0];
    if (!choice["finish_reason"].is_null()) out.finish_reason = choice["finish_reason"];
    const json& delta = choice["delta"];
    if (delta.contains("content") && delta["content"].is_string()) out.content += delta["content"].get<std::string>();
    if (!delta.contains("tool_calls")) continue;
    for (const json& part : delta["tool_calls"]) {
      const size_t k = part["index"];
      if (k == out.calls.size()) {
        EXPECT_TRUE(part.contains("id") && part.contains("type") && part["function"].contains("name")) << part;
        out.calls.push_back(part);
        continue;
      }
      EXPECT_FALSE(part.contains("id")) << "only a call's first fragment has its id: " << part;
      out.calls[k]["function"]["arguments"] =
          out.calls[k]["function"]["arguments"].get<std::string>() + part["function"]["arguments"].get<std::string>();
    }
  }
  return out;
}

TEST_F(ToolsTest, StreamedCallsAddUpToTheWholeResponse) {
  for (const ojson& choice : {ojson(named("add")), ojson("required")}) {
    ojson body = chat_body({{"tool_choice", choice}}, 5, 300);
    const ClientResponse whole = post_chat(body);
    ASSERT_EQ(whole.status, 200) << whole.body;
    body["stream"] = true;
    const ClientResponse streamed = post_chat(body);
    ASSERT_EQ(streamed.status, 200) << streamed.body;
    const FoldedStream folded = fold_stream(streamed.body);
    const json expected = whole.json()["choices"][0];
    EXPECT_EQ(folded.finish_reason, expected["finish_reason"]) << streamed.body;
    EXPECT_EQ(folded.content, "");
    ASSERT_EQ(folded.calls.size(), expected["message"]["tool_calls"].size()) << streamed.body;
    for (size_t k = 0; k < folded.calls.size(); ++k) {
      EXPECT_EQ(folded.calls[k]["function"], expected["message"]["tool_calls"][k]["function"]);
      EXPECT_TRUE(folded.calls[k]["id"].get<std::string>().starts_with("call_"));
    }
  }
}

TEST_F(ToolsTest, AutoReadsHermesAndLlama3CallsOutOfTheOutput) {
  struct Case {
    std::string parser;
    std::string regex;  // forces the model to write a call in that syntax
    std::string content;
  };
  const std::vector<Case> cases = {
      {"hermes",
       R"re(Sure\.\n<tool_call>\n\{"name": "get_weather", "arguments": \{"city": "(Oslo|Rome)", "unit": "c"\}\}\n</tool_call>)re",
       "Sure."},
      {"llama3_json", R"(\{"name": "add", "parameters": \{"a": [1-9], "b": 2\}\})", ""},
  };
  for (const Case& c : cases) {
    ServerOptions server;
    server.port = 0;
    server.tool_call_parser = c.parser;
    start(server);
    for (bool stream : {false, true}) {
      ojson body = chat_body({{"tool_choice", "auto"}, {"guided_regex", c.regex}, {"stream", stream}}, 2);
      const ClientResponse r = post_chat(body);
      ASSERT_EQ(r.status, 200) << r.body;
      json calls;
      std::string content, finish_reason;
      if (stream) {
        const FoldedStream folded = fold_stream(r.body);
        calls = folded.calls;
        content = folded.content;
        finish_reason = folded.finish_reason;
      } else {
        const json choice = r.json()["choices"][0];
        calls = choice["message"]["tool_calls"];
        content = choice["message"]["content"].is_null() ? "" : choice["message"]["content"].get<std::string>();
        finish_reason = choice["finish_reason"];
      }
      EXPECT_EQ(finish_reason, "tool_calls") << c.parser << " " << r.body;
      EXPECT_EQ(content, c.content) << c.parser;
      ASSERT_EQ(calls.size(), 1u) << c.parser << " " << r.body;
      expect_valid_arguments(calls[0]["function"]["name"], calls[0]["function"]["arguments"]);
    }
  }
}

TEST_F(ToolsTest, NoneAndAutoWithoutAToolTemplateGiveContent) {
  // stories260K's template is the plain fallback: auto finds no tool syntax in it.
  for (const char* choice : {"none", "auto"}) {
    const ClientResponse r = post_chat(chat_body({{"tool_choice", choice}, {"guided_regex", "<tool_call>x"}}));
    ASSERT_EQ(r.status, 200) << r.body;
    const json c = r.json()["choices"][0];
    EXPECT_EQ(c["message"]["content"], "<tool_call>x") << choice;
    EXPECT_FALSE(c["message"].contains("tool_calls")) << choice;
    EXPECT_EQ(c["finish_reason"], "stop");
  }
}

TEST_F(ToolsTest, ACallCutByMaxTokensEndsAsLength) {
  const ClientResponse r = post_chat(chat_body({{"tool_choice", named("get_weather")}}, 1, 3));
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = r.json()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "length");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_TRUE(choice["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>().starts_with("{"));
}

TEST_F(ToolsTest, BadToolsAndChoicesAreRefusedNamingTheField) {
  ojson body = chat_body({{"tool_choice", "required"}});
  body.erase("tools");
  expect_refused(body, "tool_choice", "needs tools");
  expect_refused(chat_body({{"tool_choice", named("nope")}}), "tool_choice", "'nope'");
  expect_refused(chat_body({{"tool_choice", "sometimes"}}), "tool_choice", "must be");
  expect_refused(chat_body({{"tools", "get_weather"}}), "tools", "must be a list");
  expect_refused(chat_body({{"parallel_tool_calls", "yes"}}), "parallel_tool_calls", "boolean");
  ojson bad = weather_tool();
  bad["function"]["name"] = "get weather";
  expect_refused(chat_body({{"tools", {bad}}}), "tools", "tools[0].function.name");
  expect_refused(chat_body({{"tools", {weather_tool(), weather_tool()}}}), "tools", "listed twice");
  bad = weather_tool();
  bad["type"] = "code_interpreter";
  expect_refused(chat_body({{"tools", {bad}}}), "tools", "tools[0]");
  bad = add_tool();
  bad["function"]["parameters"]["properties"]["a"] = {{"type", "array"}, {"uniqueItems", true}};
  expect_refused(chat_body({{"tools", {weather_tool(), bad}}, {"tool_choice", "required"}}), "tools",
                 "tools[1].function.parameters");
  expect_refused(chat_body({{"tool_choice", named("get_weather")}, {"response_format", {{"type", "json_object"}}}}),
                 "tool_choice", "cannot be combined");
  // Under auto the parameters are not compiled, so a schema loragate cannot constrain is fine there.
  EXPECT_EQ(post_chat(chat_body({{"tools", {bad}}, {"tool_choice", "auto"}}, 1, 4)).status, 200);
}

TEST_F(ToolsTest, AFunctionWithoutParametersIsCalledWithAnEmptyObject) {
  const ojson bare = {{"type", "function"}, {"function", {{"name", "ping"}}}};
  const ClientResponse r = post_chat(chat_body({{"tools", {bare}}, {"tool_choice", named("ping")}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{}");
  EXPECT_EQ(r.json()["choices"][0]["finish_reason"], "tool_calls");
}

}  // namespace
}  // namespace loragate::testing
