#include "gateway/openai/tool_choice.h"

#include <set>
#include <vector>

#include "gateway/openai/structured_output.h"

namespace loragate {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

// OpenAI's rule for function names: 1 to 64 of a-z, A-Z, 0-9, '_' and '-'.
// It also keeps names safe to splice into the calls' grammar as they are.
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// A function without parameters takes none: its arguments are {}.
ojson no_parameters() { return {{"type", "object"}, {"properties", ojson::object()}, {"additionalProperties", false}}; }

// The tools' names and parameter schemas (in written key order), checked.
struct Tool {
  std::string name;
  ojson parameters;
};

std::optional<ApiError> read_tools(const json& body, std::string_view raw_body, std::vector<Tool>* tools) {
  if (!body.contains("tools") || body["tools"].is_null()) return std::nullopt;
  const json& list = body["tools"];
  if (!list.is_array()) return bad_request("tools must be a list", "tools");
  if (list.size() > kMaxTools) return bad_request("tools holds at most " + std::to_string(kMaxTools) + " tools", "tools");
  const ojson ordered = ojson::parse(raw_body, nullptr, /*allow_exceptions=*/false);
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = "tools[" + std::to_string(i) + "]";
    const json& t = list[i];
    if (!t.is_object() || t.value("type", json()) != "function" || !t.contains("function") ||
        !t["function"].is_object()) {
      return bad_request(where + " must be {\"type\": \"function\", \"function\": {...}}", "tools");
    }
    const json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || !valid_function_name(f["name"].get<std::string>())) {
      return bad_request(where + ".function.name must be 1 to 64 letters, digits, '_' or '-'", "tools");
    }
    Tool tool{f["name"].get<std::string>(), no_parameters()};
    if (!names.insert(tool.name).second) {
      return bad_request(where + ".function.name '" + tool.name + "' is listed twice", "tools");
    }
    if (f.contains("parameters") && !f["parameters"].is_null()) {
      if (!f["parameters"].is_object()) return bad_request(where + ".function.parameters must be an object", "tools");
      // The same tool in the body as written (the parsed body sorts keys).
      if (!ordered.is_object() || !ordered.contains("tools") || !ordered["tools"].is_array() ||
          ordered["tools"].size() != list.size()) {
        return bad_request("tools: the body is not valid JSON", "tools");
      }
      tool.parameters = ordered["tools"][i]["function"]["parameters"];
    }
    tools->push_back(std::move(tool));
  }
  return std::nullopt;
}

// `schema` with every "$ref": "#..." moved under `prefix` (a JSON pointer):
// the schema is placed there inside a larger one. Values (const, enum,
// default, examples) are data, not schemas, and stay as they are.
ojson rebase_refs(const ojson& schema, const std::string& prefix) {
  if (schema.is_array()) {
    ojson out = ojson::array();
    for (const ojson& e : schema) out.push_back(rebase_refs(e, prefix));
    return out;
  }
  if (!schema.is_object()) return schema;
  ojson out = ojson::object();
  for (const auto& [key, value] : schema.items()) {
    if (key == "$ref" && value.is_string() && value.get<std::string>().starts_with("#")) {
      out[key] = "#" + prefix + value.get<std::string>().substr(1);
    } else if (key == "const" || key == "enum" || key == "default" || key == "examples") {
      out[key] = value;
    } else {
      out[key] = rebase_refs(value, prefix);
    }
  }
  return out;
}

// tool_choice "required": a list of one call or more (one when parallel
// calls are off), each naming a tool and holding arguments of its schema.
ojson calls_schema(const std::vector<Tool>& tools, bool parallel) {
  ojson alternatives = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "/items/anyOf/" + std::to_string(i) + "/properties/arguments";
    alternatives.push_back({{"type", "object"},
                            {"properties",
                             {{"name", {{"const", tools[i].name}}}, {"arguments", rebase_refs(tools[i].parameters, at)}}},
                            {"required", {"name", "arguments"}},
                            {"additionalProperties", false}});
  }
  ojson schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", std::move(alternatives)}}}};
  if (!parallel) schema["maxItems"] = 1;
  return schema;
}

// Each tool's schema compiled alone: a schema that cannot be is named by its tool.
std::optional<ApiError> check_parameters(const std::vector<Tool>& tools, const std::vector<size_t>& which) {
  for (size_t i : which) {
    std::shared_ptr<const grammar::Grammar> unused;
    if (auto err = json_schema_grammar(tools[i].parameters, "tools[" + std::to_string(i) + "].function.parameters",
                                       "tools", &unused)) {
      return err;
    }
  }
  return std::nullopt;
}

}  // namespace

ToolCallSyntax auto_tool_syntax(const ChatTemplate& chat_template, std::string_view tool_call_parser) {
  if (tool_call_parser == "hermes") return ToolCallSyntax::kHermes;
  if (tool_call_parser == "llama3_json") return ToolCallSyntax::kLlama3Json;
  if (tool_call_parser == "none") return ToolCallSyntax::kNone;
  const std::string& source = chat_template.source();
  if (source.find("<tool_call>") != std::string::npos) return ToolCallSyntax::kHermes;
  if (chat_template.family() == "llama3" && source.find("parameters") != std::string::npos) {
    return ToolCallSyntax::kLlama3Json;
  }
  return ToolCallSyntax::kNone;
}

std::optional<ApiError> read_tool_choice(const json& body, std::string_view raw_body,
                                         const ChatTemplate& chat_template, std::string_view tool_call_parser,
                                         ToolChoice* out) {
  *out = ToolChoice{};
  std::vector<Tool> tools;
  if (auto err = read_tools(body, raw_body, &tools)) return err;
  bool parallel = true;
  if (body.contains("parallel_tool_calls") && !body["parallel_tool_calls"].is_null()) {
    if (!body["parallel_tool_calls"].is_boolean()) {
      return bad_request("parallel_tool_calls must be a boolean", "parallel_tool_calls");
    }
    parallel = body["parallel_tool_calls"].get<bool>();
  }
  // OpenAI's default: auto when there are tools, else none.
  json choice = tools.empty() ? "none" : "auto";
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) choice = body["tool_choice"];
  if (choice == "none") return std::nullopt;
  if (tools.empty()) return bad_request("tool_choice needs tools", "tool_choice");
  if (choice == "auto") {
    out->syntax = auto_tool_syntax(chat_template, tool_call_parser);
    return std::nullopt;
  }
  if (choice == "required") {
    std::vector<size_t> all(tools.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    if (auto err = check_parameters(tools, all)) return err;
    out->syntax = ToolCallSyntax::kJsonList;
    return json_schema_grammar(calls_schema(tools, parallel), "tools", "tools", &out->grammar);
  }
  if (!choice.is_object() || choice.value("type", json()) != "function" || !choice.contains("function") ||
      !choice["function"].is_object() || !choice["function"].contains("name") ||
      !choice["function"]["name"].is_string()) {
    return bad_request(
        "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}",
        "tool_choice");
  }
  const std::string name = choice["function"]["name"].get<std::string>();
  for (size_t i = 0; i < tools.size(); ++i) {
    if (tools[i].name != name) continue;
    out->syntax = ToolCallSyntax::kArguments;
    out->function = name;
    return json_schema_grammar(tools[i].parameters, "tools[" + std::to_string(i) + "].function.parameters", "tools",
                               &out->grammar);
  }
  return bad_request("tool_choice names function '" + name + "', which is not in tools", "tool_choice");
}

}  // namespace loragate
