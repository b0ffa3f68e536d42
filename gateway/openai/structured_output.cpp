#include "gateway/openai/structured_output.h"

#include <list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "common/sha256.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex_grammar.h"

namespace loragate {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

constexpr size_t kCacheEntries = 256;
constexpr size_t kMaxChoices = 1024;

// An LRU of compiled grammars by key.
class GrammarCache {
 public:
  std::shared_ptr<const grammar::Grammar> find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++misses_;
      return nullptr;
    }
    ++hits_;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }
  void put(const std::string& key, std::shared_ptr<const grammar::Grammar> g) {
    std::lock_guard<std::mutex> lock(mu_);
    if (index_.count(key) != 0) return;
    order_.emplace_front(key, std::move(g));
    index_[key] = order_.begin();
    if (order_.size() > kCacheEntries) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
  }
  GrammarCacheStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {order_.size(), hits_, misses_};
  }

 private:
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const grammar::Grammar>>> order_;  // most recent first
  std::unordered_map<std::string, decltype(order_)::iterator> index_;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
};

GrammarCache& cache() {
  static GrammarCache c;
  return c;
}

bool given(const json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

// What a request asks for: which form, its source text and the field to name in errors.
struct Ask {
  std::string kind;  // "json_object", "json_schema", "regex", "choice", "grammar"
  std::string source;
  std::string field;
};

// The schema as the client wrote it (key order kept), found by path in the raw body.
std::optional<ApiError> ordered_schema(std::string_view raw_body, const std::vector<std::string>& path,
                                       const std::string& field, ojson* out) {
  ojson doc;
  try {
    doc = ojson::parse(raw_body);
  } catch (const ojson::exception&) {
    return bad_request("invalid JSON body", field);
  }
  const ojson* at = &doc;
  for (const std::string& key : path) {
    if (!at->is_object() || !at->contains(key)) return bad_request(field + " is missing", field);
    at = &(*at)[key];
  }
  // vLLM also takes guided_json as a string holding the schema.
  if (at->is_string()) {
    try {
      *out = ojson::parse(at->get<std::string>());
    } catch (const ojson::exception&) {
      return bad_request(field + " is a string that is not JSON", field);
    }
    return std::nullopt;
  }
  if (!at->is_object() && !at->is_boolean()) return bad_request(field + " must be a JSON schema (an object)", field);
  *out = *at;
  return std::nullopt;
}

std::optional<ApiError> read_ask(const json& body, std::string_view raw_body, Ask* ask, grammar::JsonWhitespace* ws) {
  std::vector<Ask> asks;
  if (given(body, "response_format")) {
    const json& rf = body["response_format"];
    if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string()) {
      return bad_request("response_format must be an object with a type", "response_format");
    }
    const std::string type = rf["type"].get<std::string>();
    if (type == "json_object") {
      asks.push_back({"json_object", "", "response_format"});
    } else if (type == "json_schema") {
      if (!rf.contains("json_schema") || !rf["json_schema"].is_object()) {
        return bad_request("response_format.json_schema must be an object with a schema", "response_format");
      }
      const json& js = rf["json_schema"];
      if (js.contains("strict") && !js["strict"].is_null() && !js["strict"].is_boolean()) {
        return bad_request("response_format.json_schema.strict must be a boolean", "response_format");
      }
      ojson schema = ojson::object();  // a json_schema without schema allows any JSON value
      if (given(js, "schema")) {
        if (auto err = ordered_schema(raw_body, {"response_format", "json_schema", "schema"}, "response_format",
                                      &schema)) {
          return err;
        }
      }
      asks.push_back({"json_schema", schema.dump(), "response_format"});
    } else if (type != "text") {
      return bad_request("response_format type must be text, json_object or json_schema, got '" + type + "'",
                         "response_format");
    }
  }
  if (given(body, "guided_json")) {
    ojson schema;
    if (auto err = ordered_schema(raw_body, {"guided_json"}, "guided_json", &schema)) return err;
    asks.push_back({"json_schema", schema.dump(), "guided_json"});
  }
  if (given(body, "guided_regex")) {
    if (!body["guided_regex"].is_string()) return bad_request("guided_regex must be a string", "guided_regex");
    asks.push_back({"regex", body["guided_regex"].get<std::string>(), "guided_regex"});
  }
  if (given(body, "guided_choice")) {
    const json& c = body["guided_choice"];
    if (!c.is_array() || c.empty() || c.size() > kMaxChoices) {
      return bad_request("guided_choice must be a list of 1 to " + std::to_string(kMaxChoices) + " strings",
                         "guided_choice");
    }
    for (const json& s : c) {
      if (!s.is_string() || s.get<std::string>().empty()) {
        return bad_request("guided_choice must hold non-empty strings", "guided_choice");
      }
    }
    asks.push_back({"choice", c.dump(), "guided_choice"});
  }
  if (given(body, "guided_grammar")) {
    if (!body["guided_grammar"].is_string()) return bad_request("guided_grammar must be a string", "guided_grammar");
    asks.push_back({"grammar", body["guided_grammar"].get<std::string>(), "guided_grammar"});
  }
  if (asks.size() > 1) {
    return bad_request("give one of response_format (json), guided_json, guided_regex, guided_choice and "
                       "guided_grammar, not " + asks[0].field + " and " + asks[1].field,
                       asks[1].field);
  }
  *ws = grammar::JsonWhitespace::kCompact;
  if (given(body, "json_whitespace")) {  // loragate's extension: how JSON output may be laid out
    const json& w = body["json_whitespace"];
    if (w == "flexible") {
      *ws = grammar::JsonWhitespace::kFlexible;
    } else if (w != "compact") {
      return bad_request("json_whitespace must be \"compact\" or \"flexible\"", "json_whitespace");
    }
  }
  if (!asks.empty()) *ask = std::move(asks.front());
  return std::nullopt;
}

// guided_choice: exactly one of the strings.
Result<grammar::Grammar> choice_grammar(const json& choices) {
  grammar::GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  for (const json& c : choices) b.add_alternative(root, grammar::GrammarBuilder::literal(c.get<std::string>()));
  return b.build(root);
}

Result<grammar::Grammar> compile(const Ask& ask, grammar::JsonWhitespace ws) {
  grammar::JsonSchemaOptions options;
  options.whitespace = ws;
  if (ask.kind == "json_object") return grammar::json_value_grammar(ws, /*object_only=*/true);
  if (ask.kind == "json_schema") return grammar::compile_json_schema(ojson::parse(ask.source), options);
  if (ask.kind == "regex") return grammar::compile_regex(ask.source);
  if (ask.kind == "choice") return choice_grammar(json::parse(ask.source));
  return grammar::parse_gbnf(ask.source);
}

// The grammar `ask` compiles to, from the cache when it was compiled before.
std::optional<ApiError> cached_grammar(const Ask& ask, grammar::JsonWhitespace ws,
                                       std::shared_ptr<const grammar::Grammar>* out) {
  const std::string key =
      sha256_hex(ask.kind + '\0' + (ws == grammar::JsonWhitespace::kCompact ? "compact" : "flexible") + '\0' + ask.source);
  if (auto hit = cache().find(key)) {
    *out = std::move(hit);
    return std::nullopt;
  }
  auto compiled = compile(ask, ws);
  if (!compiled.is_ok()) return bad_request(ask.field + ": " + compiled.status().message(), ask.field);
  auto g = std::make_shared<const grammar::Grammar>(std::move(compiled).value());
  cache().put(key, g);
  *out = std::move(g);
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> read_structured_output(const json& body, std::string_view raw_body,
                                               std::shared_ptr<const grammar::Grammar>* out) {
  Ask ask;
  grammar::JsonWhitespace ws = grammar::JsonWhitespace::kCompact;
  if (auto err = read_ask(body, raw_body, &ask, &ws)) return err;
  if (ask.kind.empty()) return std::nullopt;
  return cached_grammar(ask, ws, out);
}

std::optional<ApiError> json_schema_grammar(const ojson& schema, const std::string& field, const std::string& param,
                                            std::shared_ptr<const grammar::Grammar>* out) {
  auto err = cached_grammar({"json_schema", schema.dump(), field}, grammar::JsonWhitespace::kCompact, out);
  if (err) err->param = param;
  return err;
}

GrammarCacheStats grammar_cache_stats() { return cache().stats(); }

}  // namespace loragate
