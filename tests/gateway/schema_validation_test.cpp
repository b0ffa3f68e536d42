// Structured output checked by a real JSON Schema validator (issue 24): a set
// of schemas covering the keywords grammar/json_schema.h supports, each asked
// for several times with temperature 1 (different seeds; chat's
// response_format json_schema and completions' guided_json; some streamed).
// Every output that ends with "stop" must parse and validate against its
// schema: the outputs go to a JSONL file that tests/gateway/validate_instances.py
// checks with python3-jsonschema (Draft 2020-12, formats checked strictly).
// Outputs cut by max_tokens ("length") are not complete documents and are not
// checked, but every schema must have some that stop, so the test cannot pass
// without checking anything. Without python3 or its jsonschema module the test
// is skipped, and fails under CI=true.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/gateway/gateway_fixture.h"

namespace loragate::testing {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// The schemas, each written as a client would send it (property order kept).
const std::vector<std::string>& validation_schemas() {
  static const std::vector<std::string> kSchemas = {
      // properties / required / additionalProperties: false, bounded members
      R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
          "age": {"type": "integer", "minimum": 0, "maximum": 120},
          "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
          "required": ["name", "age", "tags"], "additionalProperties": false})",
      // optional properties only
      R"({"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"},
          "c": {"type": "integer", "minimum": -9, "maximum": 0}}, "additionalProperties": false})",
      // type lists (nullable)
      R"({"type": ["string", "null"], "maxLength": 8})",
      R"({"type": "array", "items": {"type": ["integer", "boolean", "null"], "minimum": -50, "maximum": 50},
          "minItems": 1, "maxItems": 4})",
      R"({"type": "object", "properties": {"n": {"type": ["integer", "null"], "minimum": 0, "maximum": 5},
          "s": {"type": ["string", "null"], "maxLength": 3}}, "required": ["n", "s"], "additionalProperties": false})",
      // enum of mixed values, const
      R"({"enum": ["red", "green", 1, 2.5, null, true, {"a": 1}, [1, "x"]]})",
      R"({"type": "object", "properties": {"kind": {"const": "point"}, "x": {"type": "integer", "minimum": -5, "maximum": 5},
          "tag": {"const": {"v": [1, null]}}}, "required": ["kind", "x", "tag"], "additionalProperties": false})",
      // anyOf, allOf of one
      R"({"anyOf": [{"type": "integer", "minimum": 0, "maximum": 9}, {"type": "string", "maxLength": 4},
          {"type": "array", "items": {"type": "boolean"}, "maxItems": 3}]})",
      R"({"allOf": [{"type": "object", "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 1000}},
          "required": ["id"], "additionalProperties": false}]})",
      // $ref into $defs and definitions, and a recursive one
      R"({"$defs": {"pt": {"type": "object", "properties": {"x": {"type": "integer", "minimum": -9, "maximum": 9},
          "y": {"type": "integer", "minimum": -9, "maximum": 9}}, "required": ["x", "y"], "additionalProperties": false}},
          "type": "object", "properties": {"from": {"$ref": "#/$defs/pt"}, "to": {"$ref": "#/$defs/pt"}},
          "required": ["from", "to"], "additionalProperties": false})",
      R"({"definitions": {"color": {"enum": ["r", "g", "b"]}}, "type": "array",
          "items": {"$ref": "#/definitions/color"}, "minItems": 1, "maxItems": 5})",
      R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer", "minimum": 0, "maximum": 9},
          "next": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/node"}]}}, "required": ["v", "next"],
          "additionalProperties": false}}, "$ref": "#/$defs/node"})",
      // items with minItems / maxItems; prefixItems (closed, and followed by items)
      R"({"type": "array", "items": {"type": "integer", "minimum": -3, "maximum": 3}, "minItems": 2, "maxItems": 4})",
      R"({"type": "array", "prefixItems": [{"type": "string", "maxLength": 5},
          {"type": "integer", "minimum": 0, "maximum": 99}, {"type": "boolean"}], "items": false})",
      R"({"type": "array", "prefixItems": [{"const": "head"}], "items": {"type": "null"}, "maxItems": 3})",
      // strings: lengths and patterns
      R"({"type": "object", "properties": {"s": {"type": "string", "minLength": 2, "maxLength": 6},
          "t": {"type": "string", "maxLength": 0}}, "required": ["s", "t"], "additionalProperties": false})",
      R"({"type": "array", "items": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"}, "minItems": 1, "maxItems": 3})",
      R"({"type": "object", "properties": {"code": {"type": "string", "pattern": "[a-c]+x(yz)?"}},
          "required": ["code"], "additionalProperties": false})",
      // formats, several values each so that a rare bad one shows up
      R"({"type": "array", "items": {"type": "string", "format": "date"}, "minItems": 4, "maxItems": 6})",
      R"({"type": "array", "items": {"type": "string", "format": "time"}, "minItems": 2, "maxItems": 4})",
      R"({"type": "array", "items": {"type": "string", "format": "date-time"}, "minItems": 2, "maxItems": 3})",
      R"({"type": "array", "items": {"type": "string", "format": "uuid"}, "minItems": 1, "maxItems": 3})",
      R"({"type": "array", "items": {"type": "string", "format": "email"}, "minItems": 1, "maxItems": 1})",
      // integers with exclusive bounds; numbers with integer bounds; unbounded numbers
      R"({"type": "array", "items": {"type": "integer", "exclusiveMinimum": -10, "exclusiveMaximum": 10},
          "minItems": 2, "maxItems": 5})",
      R"({"type": "array", "items": {"type": "number", "minimum": -2, "maximum": 3}, "minItems": 2, "maxItems": 5})",
      R"({"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 3})",
      // fractional and exclusive number bounds; whole multipleOf (open-ended and listed). A
      // power-of-ten multipleOf (0.01) is left to tests/grammar: python's float division
      // calls 0.07 no multiple of 0.01.
      R"({"type": "array", "items": {"type": "number", "exclusiveMinimum": -0.75, "maximum": 2.5},
          "minItems": 2, "maxItems": 5})",
      R"({"type": "array", "items": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.5},
          "minItems": 1, "maxItems": 3})",
      R"({"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 7},
          "b": {"type": "integer", "multipleOf": 25, "minimum": -100, "maximum": 300},
          "c": {"type": "number", "multipleOf": 4, "exclusiveMinimum": 0}},
          "required": ["a", "b", "c"], "additionalProperties": false})",
      // oneOf with a discriminator; allOf of several; choices with keywords beside them
      R"({"type": "array", "minItems": 1, "maxItems": 3, "items": {"oneOf": [
          {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "integer", "minimum": 1, "maximum": 9}},
           "required": ["kind", "r"], "additionalProperties": false},
          {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "number", "maximum": 2.5}},
           "required": ["kind", "side"], "additionalProperties": false}]}})",
      R"({"allOf": [{"type": "object", "properties": {"id": {"type": "integer", "minimum": 1}}, "required": ["id"]},
                    {"properties": {"id": {"maximum": 50}, "tag": {"type": "string", "enum": ["a", "b", 3]}},
                     "required": ["tag"]}]})",
      R"({"anyOf": [{"type": "integer"}, {"type": "string"}], "minimum": 10, "maximum": 20, "maxLength": 3})",
      // the network formats
      R"({"type": "array", "items": {"type": "string", "format": "ipv4"}, "minItems": 1, "maxItems": 3})",
      R"({"type": "array", "items": {"type": "string", "format": "ipv6"}, "minItems": 1, "maxItems": 2})",
      // nested objects and arrays
      R"({"type": "object", "properties": {"user": {"type": "object", "properties": {
          "name": {"type": "string", "maxLength": 8}, "admin": {"type": "boolean"}}, "required": ["name"],
          "additionalProperties": false}, "scores": {"type": "array", "items": {"type": "array",
          "items": {"type": "integer", "minimum": 0, "maximum": 10}, "maxItems": 3}, "maxItems": 3}},
          "required": ["user", "scores"], "additionalProperties": false})",
  };
  return kSchemas;
}

// One request per seed: odd seeds on chat (response_format), even ones on
// completions (guided_json); the last two of each schema streamed.
constexpr int kSchemaSeeds = 5;
constexpr int kSchemaMaxTokens = 384;
// An email may be 64 + 600 characters long and the synthetic model writes about one per token
// (448: what the models' 512-token context leaves beside the prompt).
int schema_max_tokens(const std::string& schema) {
  return schema.find("\"email\"") != std::string::npos ? 448 : kSchemaMaxTokens;
}

struct ValidationOutput {
  int status = 0;
  std::string text;
  std::string finish_reason;
  std::string error;  // why the response could not be read
};

// The output of a streamed response: its deltas joined, and the finish_reason.
ValidationOutput read_validation_stream(const ClientResponse& r, bool chat) {
  ValidationOutput out;
  out.status = r.status;
  for (const std::string& event : sse_events(r.body)) {
    if (event == "[DONE]") continue;
    const json chunk = json::parse(event, nullptr, false);
    if (chunk.is_discarded() || !chunk.contains("choices")) {
      out.error = "bad stream chunk: " + event;
      return out;
    }
    for (const json& c : chunk["choices"]) {
      if (chat) {
        if (c.contains("delta") && c["delta"].contains("content") && c["delta"]["content"].is_string()) {
          out.text += c["delta"]["content"].get<std::string>();
        }
      } else if (c.contains("text") && c["text"].is_string()) {
        out.text += c["text"].get<std::string>();
      }
      if (c.contains("finish_reason") && c["finish_reason"].is_string()) {
        out.finish_reason = c["finish_reason"].get<std::string>();
      }
    }
  }
  return out;
}

ValidationOutput read_validation_response(const ClientResponse& r, bool chat) {
  ValidationOutput out;
  out.status = r.status;
  const json doc = r.json();
  if (doc.is_discarded() || !doc.contains("choices") || doc["choices"].empty()) {
    out.error = "bad response: " + r.body;
    return out;
  }
  const json& c = doc["choices"][0];
  const json& text = chat ? c["message"]["content"] : c["text"];
  if (!text.is_string()) {
    out.error = "no text in: " + r.body;
    return out;
  }
  out.text = text.get<std::string>();
  out.finish_reason = c.value("finish_reason", "");
  return out;
}

// A python3 that can import jsonschema: $LORAGATE_PYTHON when set, else
// Debian's (/usr/bin/python3, with python3-jsonschema, as CI installs it),
// else the one on PATH; "" if none.
std::string python_with_jsonschema() {
  const char* chosen = std::getenv("LORAGATE_PYTHON");
  std::vector<std::string> candidates = {"/usr/bin/python3", "python3"};
  if (chosen != nullptr && *chosen != '\0') candidates = {chosen};
  for (const std::string& python : candidates) {
    if (run_command(python + " -c 'import jsonschema'").first == 0) return python;
  }
  return "";
}

class SchemaValidationTest : public GatewayTest {};

TEST_F(SchemaValidationTest, EveryStoppedOutputValidatesAgainstItsSchema) {
  const std::string python = python_with_jsonschema();
  if (python.empty()) {
    const char* chosen = std::getenv("LORAGATE_PYTHON");
    const std::string why = chosen != nullptr && *chosen != '\0'
                                ? std::string("LORAGATE_PYTHON=") + chosen + " cannot import jsonschema"
                                : "python3 with the jsonschema module is not installed (Debian: python3-jsonschema; "
                                  "scripts/setup.sh installs it)";
    if (in_ci()) GTEST_FAIL() << why << " (CI=true: a missing validator fails)";
    GTEST_SKIP() << why;
  }
  const std::string script = std::string(LORAGATE_SOURCE_DIR) + "/tests/gateway/validate_instances.py";
  ASSERT_TRUE(std::filesystem::exists(script)) << script;
  const std::string dir = make_temp_dir("lg-schema-validation");
  ASSERT_FALSE(dir.empty());
  const std::string instances = dir + "/instances.jsonl";
  std::ofstream out(instances);

  int stopped_total = 0;
  int requests = 0;
  std::string stops_per_schema;
  for (size_t i = 0; i < validation_schemas().size(); ++i) {
    const ordered_json schema = ordered_json::parse(validation_schemas()[i]);
    int stopped = 0;
    for (int seed = 1; seed <= kSchemaSeeds; ++seed) {
      const bool chat = seed % 2 == 1;
      const bool stream = seed > kSchemaSeeds - 2;
      ordered_json body = {{"model", kServed}, {"max_tokens", schema_max_tokens(validation_schemas()[i])}, {"temperature", 1.0},
                           {"seed", seed * 1000 + static_cast<int>(i)}};
      if (chat) {
        body["messages"] = ordered_json::array({{{"role", "user"}, {"content", "Write the JSON."}}});
        body["response_format"] = {{"type", "json_schema"},
                                   {"json_schema", {{"name", "s" + std::to_string(i)}, {"schema", schema}}}};
      } else {
        body["prompt"] = kGoldenPrompt;
        body["guided_json"] = schema;
      }
      if (stream) body["stream"] = true;
      const std::string target = chat ? "/v1/chat/completions" : "/v1/completions";
      const ClientResponse r =
          http_call(port_, http::verb::post, target, body.dump(), {{"Content-Type", "application/json"}});
      ++requests;
      ASSERT_EQ(r.status, 200) << "schema " << i << ": " << validation_schemas()[i] << "\n-> " << r.body;
      const ValidationOutput o = stream ? read_validation_stream(r, chat) : read_validation_response(r, chat);
      ASSERT_TRUE(o.error.empty()) << "schema " << i << ": " << o.error;
      ASSERT_TRUE(o.finish_reason == "stop" || o.finish_reason == "length")
          << "schema " << i << ": finish_reason '" << o.finish_reason << "'";
      if (o.finish_reason != "stop") continue;
      ++stopped;
      // The schema goes as the client wrote it; dump() refuses text that is not UTF-8.
      std::string line;
      try {
        line = ordered_json{{"schema", schema}, {"instance_text", o.text}}.dump();
      } catch (const nlohmann::json::exception& e) {
        ADD_FAILURE() << "schema " << i << ": output is not UTF-8 (" << e.what() << ")";
        continue;
      }
      out << line << "\n";
    }
    stops_per_schema += " " + std::to_string(stopped);
    stopped_total += stopped;
    EXPECT_GE(stopped, 1) << "schema " << i << " never ended with stop in " << kSchemaSeeds
                          << " tries, so nothing of it was validated: " << validation_schemas()[i];
  }
  out.close();
  std::printf("[ schema validation ] %d requests, %d ended with stop; per schema:%s\n", requests, stopped_total,
              stops_per_schema.c_str());

  const auto [code, report] = run_command(python + " '" + script + "' '" + instances + "'");
  std::printf("%s", report.c_str());
  if (code == 0) std::filesystem::remove_all(dir);
  EXPECT_EQ(code, 0) << "some outputs do not validate (instances kept in " << instances << "):\n" << report;
}

}  // namespace
}  // namespace loragate::testing
