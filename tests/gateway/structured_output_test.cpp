// Structured output through a real server: response_format json_object and
// json_schema, guided_json / guided_regex / guided_choice / guided_grammar on
// both routes give text that parses and matches, streamed or not; max_tokens
// cuts as "length"; bad schemas and conflicting fields are 400s naming the
// field and the keyword; the compiled grammar is cached by what was asked.
#include <gtest/gtest.h>

#include <regex>

#include "gateway/openai/structured_output.h"
#include "tests/gateway/gateway_fixture.h"

namespace loragate::testing {
namespace {

using nlohmann::json;

class StructuredOutputTest : public GatewayTest {
 protected:
  json completion(json extra, int max_tokens = 200, double temperature = 1.0, int seed = 1) {
    json body = {{"model", kServed}, {"prompt", kGoldenPrompt}, {"max_tokens", max_tokens},
                 {"temperature", temperature}, {"seed", seed}};
    body.update(extra);
    return body;
  }
  std::string text_of(const ClientResponse& r) { return r.json()["choices"][0]["text"].get<std::string>(); }
  // Posts a body whose keys keep the order written (nlohmann::json would sort a schema's properties).
  ClientResponse post_ordered(const nlohmann::ordered_json& body) {
    return http_call(port_, http::verb::post, "/v1/completions", body.dump(), {{"Content-Type", "application/json"}});
  }
};

TEST_F(StructuredOutputTest, JsonSchemaOutputParsesAndFollowsTheSchema) {
  const auto schema = nlohmann::ordered_json::parse(R"({"type": "object",
      "properties": {"name": {"type": "string", "maxLength": 12},
                     "age": {"type": "integer", "minimum": 0, "maximum": 120},
                     "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
      "required": ["name", "age", "tags"], "additionalProperties": false})");
  for (int seed = 1; seed <= 4; ++seed) {
    nlohmann::ordered_json body = {{"model", kServed}, {"prompt", kGoldenPrompt}, {"max_tokens", 200}, {"seed", seed}};
    body["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "p"}, {"schema", schema}}}};
    const ClientResponse r = post_ordered(body);
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string text = text_of(r);
    EXPECT_EQ(r.json()["choices"][0]["finish_reason"], "stop") << text;
    const json doc = json::parse(text);  // throws, failing the test, if it does not parse
    EXPECT_TRUE(doc["name"].is_string() && doc["name"].get<std::string>().size() <= 12 * 4) << text;
    EXPECT_TRUE(doc["age"].is_number_integer() && doc["age"] >= 0 && doc["age"] <= 120) << text;
    EXPECT_LE(doc["tags"].size(), 3u) << text;
    EXPECT_EQ(doc.size(), 3u) << text;
    EXPECT_EQ(text.rfind("{\"name\":", 0), 0u) << "schema order, compact: " << text;
  }
}

TEST_F(StructuredOutputTest, JsonObjectOnChatAndGuidedFormsOnCompletions) {
  json chat = {{"model", kServed}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 200},
               {"seed", 3}, {"response_format", {{"type", "json_object"}}}};
  ClientResponse r = post("/v1/chat/completions", chat);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string content = r.json()["choices"][0]["message"]["content"].get<std::string>();
  if (r.json()["choices"][0]["finish_reason"] == "stop") {
    EXPECT_TRUE(json::parse(content).is_object()) << content;
  }

  r = post("/v1/completions", completion({{"guided_choice", {"yes", "no", "maybe later"}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(text_of(r) == "yes" || text_of(r) == "no" || text_of(r) == "maybe later") << text_of(r);

  r = post("/v1/completions", completion({{"guided_regex", "[0-9]{3}-[0-9]{4}"}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(std::regex_match(text_of(r), std::regex("[0-9]{3}-[0-9]{4}"))) << text_of(r);

  r = post("/v1/completions", completion({{"guided_grammar", "root ::= \"Once\" (\" \" [a-z]+){1,3} \".\""}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(std::regex_match(text_of(r), std::regex("Once( [a-z]+){1,3}\\."))) << text_of(r);

  r = post("/v1/completions", completion({{"guided_json", {{"type", "array"}, {"items", {{"type", "boolean"}}},
                                                           {"minItems", 2}, {"maxItems", 2}}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const json arr = json::parse(text_of(r));
  EXPECT_EQ(arr.size(), 2u);
}

TEST_F(StructuredOutputTest, StreamedTextIsTheSameSentence) {
  json body = completion({{"guided_regex", "(ab|cd){2,4}!"}, {"stream", true}});
  const ClientResponse r = post("/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  std::string text;
  for (size_t at = r.body.find("data: {"); at != std::string::npos; at = r.body.find("data: {", at + 1)) {
    const size_t end = r.body.find("\n\n", at);
    const json chunk = json::parse(r.body.substr(at + 6, end - at - 6));
    if (!chunk["choices"].empty()) text += chunk["choices"][0].value("text", "");
  }
  EXPECT_TRUE(std::regex_match(text, std::regex("(ab|cd){2,4}!"))) << text;
  body.erase("stream");
  EXPECT_EQ(text_of(post("/v1/completions", body)), text);
}

TEST_F(StructuredOutputTest, MaxTokensEndsAnUnfinishedDocumentAsLength) {
  const ClientResponse r = post("/v1/completions", completion({{"response_format", {{"type", "json_object"}}}}, 3));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["choices"][0]["finish_reason"], "length");
}

TEST_F(StructuredOutputTest, BadRequestsNameTheFieldAndKeyword) {
  struct Case {
    json extra;
    std::string param;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{{"response_format", {{"type", "xml"}}}}, "response_format", "text, json_object or json_schema"},
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "string"}, {"contentEncoding", "x"}}}}}}}},
       "response_format", "keyword 'contentEncoding' is not supported"},
      {{{"guided_json", {{"type", "array"}, {"uniqueItems", true}}}}, "guided_json", "'uniqueItems'"},
      {{{"guided_regex", "a(?=b)"}}, "guided_regex", "guided_regex"},
      {{{"guided_grammar", "root ::= ("}}, "guided_grammar", "gbnf"},
      {{{"guided_choice", json::array()}}, "guided_choice", "guided_choice must be a list"},
      {{{"guided_choice", {"a"}}, {"guided_regex", "a"}}, "guided_choice", "give one of"},
      {{{"guided_json", "{not json"}}, "guided_json", "not JSON"},
      {{{"guided_json", {{"type", "integer"}}}, {"json_whitespace", "wide"}}, "json_whitespace", "compact"},
  };
  for (const Case& c : cases) {
    const ClientResponse r = post("/v1/completions", completion(c.extra));
    EXPECT_EQ(r.status, 400) << c.extra.dump() << " -> " << r.body;
    EXPECT_EQ(r.json()["error"]["param"], c.param) << r.body;
    EXPECT_NE(r.body.find(c.needle), std::string::npos) << c.extra.dump() << " -> " << r.body;
  }
}

TEST_F(StructuredOutputTest, CompiledGrammarsAreCachedByWhatWasAsked) {
  nlohmann::ordered_json ask = {{"model", kServed}, {"prompt", kGoldenPrompt}, {"max_tokens", 200}, {"seed", 1}};
  ask["guided_json"] = nlohmann::ordered_json::parse(
      R"({"type": "object", "properties": {"zz": {"type": "integer"}, "aa": {"type": "null"}}, "required": ["zz", "aa"]})");
  const GrammarCacheStats before = grammar_cache_stats();
  const ClientResponse first = post_ordered(ask);
  ASSERT_EQ(first.status, 200) << first.body;
  // Properties come in the order the client wrote them, not sorted.
  EXPECT_EQ(text_of(first).rfind("{\"zz\":", 0), 0u) << text_of(first);
  EXPECT_TRUE(text_of(first).find(",\"aa\":null}") != std::string::npos) << text_of(first);
  ASSERT_EQ(post_ordered(ask).status, 200);
  const GrammarCacheStats after = grammar_cache_stats();
  EXPECT_EQ(after.misses - before.misses, 1);
  EXPECT_EQ(after.hits - before.hits, 1);
}

}  // namespace
}  // namespace loragate::testing
