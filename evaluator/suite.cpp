#include "evaluator/suite.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "common/sha256.h"
#include "evaluator/metrics.h"

namespace loragate::eval {
namespace {

using nlohmann::json;

Result<std::string> read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found("cannot read " + what + " " + path);
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::io_error("error reading " + what + " " + path);
  return text.str();
}

std::string known_list(const std::set<std::string>& known) {
  std::string list;
  for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
  return list;
}

// ---- JSONL ------------------------------------------------------------------------

// One JSONL line's position, for "file:line: field: what" errors.
struct Where {
  const std::string& file;
  size_t line;

  Status error(const std::string& field, const std::string& what) const {
    return Status::invalid_argument(file + ":" + std::to_string(line) + ": " +
                                    (field.empty() ? "" : field + ": ") + what);
  }
};

// A value as the error shows it, cut so one bad line cannot flood a log.
std::string shown(const json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

Status read_string(const json& obj, const char* key, const Where& w, bool required, std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return required ? w.error(key, "missing (a string is required)") : Status::ok();
  if (!it->is_string()) return w.error(key, "must be a string, got " + shown(*it));
  *out = it->get<std::string>();
  return Status::ok();
}

// Integers only: 3.0, "3" and true are refused.
Status read_int(const json& v, const std::string& field, const Where& w, int64_t min, int64_t max, int64_t* out) {
  const std::string want = "must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (!v.is_number_integer()) return w.error(field, want + ", got " + shown(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return w.error(field, want + ", got " + shown(v));
  }
  const int64_t x = v.get<int64_t>();
  if (x < min || x > max) return w.error(field, want + ", got " + shown(v));
  *out = x;
  return Status::ok();
}

Status read_ids(const json& obj, const char* key, const Where& w, std::vector<int32_t>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::ok();
  if (!it->is_array()) return w.error(key, "must be a list of token ids, got " + shown(*it));
  out->reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    int64_t id = 0;
    LG_RETURN_IF_ERROR(read_int((*it)[i], std::string(key) + "[" + std::to_string(i) + "]", w, 0, INT32_MAX, &id));
    out->push_back(static_cast<int32_t>(id));
  }
  return Status::ok();
}

// The OpenAI messages list, checked as the chat endpoint checks it.
Status check_messages(const json& messages, const Where& w) {
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool"};
  if (!messages.is_array() || messages.empty()) return w.error("messages", "must be a non-empty list of messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string field = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return w.error(field, "must be an object {role, content}");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string() || !kRoles.count(role->get<std::string>())) {
      return w.error(field + ".role", "must be one of " + known_list(kRoles));
    }
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      if (*role != "assistant") return w.error(field + ".content", "missing (a string is required)");
      continue;
    }
    if (content->is_string()) continue;
    bool parts_ok = content->is_array();
    for (const json& part : parts_ok ? *content : json::array()) {
      parts_ok = parts_ok && part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
                 part["text"].is_string();
    }
    if (!parts_ok) {
      return w.error(field + ".content", "must be a string or a list of {\"type\": \"text\", \"text\": ...}");
    }
  }
  return Status::ok();
}

// A list of words for include_exclude: W holds only [A-Za-z]+ runs, so any other word could never match.
Status read_words(const json& kw, const char* key, const Where& w, bool required, std::vector<std::string>* out) {
  const std::string field = std::string("keyword.") + key;
  auto it = kw.find(key);
  if (it == kw.end() || it->is_null()) {
    return required ? w.error(field, "missing (a list of words is required)") : Status::ok();
  }
  if (!it->is_array() || (required && it->empty())) {
    const std::string want = required ? "must be a non-empty list of words" : "must be a list of words";
    return w.error(field, want + ", got " + shown(*it));
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json& word = (*it)[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    if (!word.is_string()) return w.error(at, "must be a string, got " + shown(word));
    const std::string s = word.get<std::string>();
    const bool alpha = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
      return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    });
    if (!alpha) return w.error(at, "'" + s + "' can never match: words are compared as maximal [A-Za-z]+ runs");
    out->push_back(s);
  }
  return Status::ok();
}

Status read_keyword(const json& obj, const Where& w, KeywordRule* rule) {
  auto it = obj.find("keyword");
  if (it == obj.end() || it->is_null()) return Status::ok();
  const json& kw = *it;
  if (!kw.is_object()) return w.error("keyword", "must be an object with a type, got " + shown(kw));
  auto t = kw.find("type");
  if (t == kw.end() || !t->is_string()) {
    return w.error("keyword.type", "missing (a string: include_exclude, prefix or regex)");
  }
  const std::string type = t->get<std::string>();
  std::set<std::string> known;
  if (type == "include_exclude") {
    rule->type = KeywordRule::Type::kIncludeExclude;
    known = {"type", "include_any", "exclude"};
  } else if (type == "prefix") {
    rule->type = KeywordRule::Type::kPrefix;
    known = {"type", "prefix"};
  } else if (type == "regex") {
    rule->type = KeywordRule::Type::kRegex;
    known = {"type", "pattern"};
  } else {
    return w.error("keyword.type", "unknown type '" + type + "' (expected include_exclude, prefix or regex)");
  }
  // A misspelt key would silently weaken the rule, so keys the type does not use are refused.
  for (auto k = kw.begin(); k != kw.end(); ++k) {
    if (!known.count(k.key())) {
      return w.error("keyword." + k.key(), "unknown key for type " + type + " (known: " + known_list(known) + ")");
    }
  }
  switch (rule->type) {
    case KeywordRule::Type::kIncludeExclude:
      LG_RETURN_IF_ERROR(read_words(kw, "include_any", w, true, &rule->include_any));
      return read_words(kw, "exclude", w, false, &rule->exclude);
    case KeywordRule::Type::kPrefix: {
      auto p = kw.find("prefix");
      if (p == kw.end() || !p->is_string() || p->get<std::string>().empty()) {
        return w.error("keyword.prefix", "must be a non-empty string");
      }
      rule->prefix = p->get<std::string>();
      return Status::ok();
    }
    case KeywordRule::Type::kRegex: {
      auto p = kw.find("pattern");
      if (p == kw.end() || !p->is_string() || p->get<std::string>().empty()) {
        return w.error("keyword.pattern", "must be a non-empty string");
      }
      rule->pattern = p->get<std::string>();
      const Status compiled = check_keyword_pattern(rule->pattern);
      return compiled.is_ok() ? compiled : w.error("keyword.pattern", compiled.message());
    }
    case KeywordRule::Type::kNone:
      break;
  }
  return Status::ok();
}

Result<EvalItem> parse_eval_item(const json& obj, const Where& w) {
  EvalItem item;
  LG_RETURN_IF_ERROR(read_string(obj, "id", w, true, &item.id));
  if (item.id.empty()) return w.error("id", "must not be empty");

  const bool has_prompt = obj.contains("prompt") && !obj["prompt"].is_null();
  const bool has_messages = obj.contains("messages") && !obj["messages"].is_null();
  if (has_prompt == has_messages) {
    return w.error(has_prompt ? "messages" : "prompt", has_prompt ? "give prompt or messages, not both"
                                                                  : "missing (give prompt or messages)");
  }
  if (has_prompt) {
    LG_RETURN_IF_ERROR(read_string(obj, "prompt", w, true, &item.prompt));
  } else {
    LG_RETURN_IF_ERROR(check_messages(obj["messages"], w));
    item.messages = obj["messages"];
  }
  LG_RETURN_IF_ERROR(read_ids(obj, "prompt_ids", w, &item.prompt_ids));
  LG_RETURN_IF_ERROR(read_string(obj, "reference", w, true, &item.reference));
  LG_RETURN_IF_ERROR(read_ids(obj, "reference_ids", w, &item.reference_ids));
  if (auto k = obj.find("reference_sentences"); k != obj.end() && !k->is_null()) {
    int64_t sentences = 0;
    LG_RETURN_IF_ERROR(read_int(*k, "reference_sentences", w, 0, INT32_MAX, &sentences));
    item.reference_sentences = static_cast<int32_t>(sentences);
  }
  LG_RETURN_IF_ERROR(read_keyword(obj, w, &item.keyword));
  return item;
}

Result<GenericItem> parse_generic_item(const json& obj, const Where& w) {
  GenericItem item;
  LG_RETURN_IF_ERROR(read_string(obj, "id", w, true, &item.id));
  if (item.id.empty()) return w.error("id", "must not be empty");
  const bool has_ids = obj.contains("ids") && !obj["ids"].is_null();
  const bool has_text = obj.contains("text") && !obj["text"].is_null();
  if (has_ids == has_text) {
    return w.error(has_ids ? "text" : "ids", has_ids ? "give ids or text, not both" : "missing (give ids or text)");
  }
  if (has_ids) {
    LG_RETURN_IF_ERROR(read_ids(obj, "ids", w, &item.ids));
    if (item.ids.empty()) return w.error("ids", "must not be empty");
  } else {
    LG_RETURN_IF_ERROR(read_string(obj, "text", w, true, &item.text));
    if (item.text.empty()) return w.error("text", "must not be empty");
  }
  return item;
}

// Reads `path` one JSON object per non-blank line, parses each with `parse`
// and refuses repeated ids. T has an `id`.
template <typename T>
Result<std::vector<T>> load_jsonl(const std::string& path, const std::string& what,
                                  const std::function<Result<T>(const json&, const Where&)>& parse) {
  LG_ASSIGN_OR_RETURN(std::string text, read_file(path, what));
  std::vector<T> items;
  std::map<std::string, size_t> first_line;  // id -> line
  std::istringstream in(text);
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (number == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);  // UTF-8 BOM
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const Where w{path, number};
    json obj;
    try {
      obj = json::parse(line);
    } catch (const json::parse_error& e) {
      // nlohmann says "parse error at line 1, column N: ..."; the line is ours, so keep the column on.
      const std::string detail = e.what();
      const size_t column = detail.find("column ");
      return w.error("", "invalid JSON" +
                             (column == std::string::npos ? ": " + detail : " at " + detail.substr(column)));
    }
    if (!obj.is_object()) return w.error("", "must be a JSON object, got " + shown(obj));
    LG_ASSIGN_OR_RETURN(T item, parse(obj, w));
    auto [it, fresh] = first_line.emplace(item.id, number);
    if (!fresh) {
      return w.error("id", "duplicate id '" + item.id + "' (first on line " + std::to_string(it->second) + ")");
    }
    items.push_back(std::move(item));
  }
  if (items.empty()) return Status::invalid_argument(path + ": no items: the " + what + " has no non-blank line");
  return items;
}

// ---- suite YAML -------------------------------------------------------------------

// "file:line: key.path: what", the line of `node` (1-based).
struct YamlWhere {
  const std::string& file;

  Status error(const YAML::Node& node, const std::string& field, const std::string& what) const {
    const int line = node.Mark().line;
    return Status::invalid_argument(file + (line >= 0 ? ":" + std::to_string(line + 1) : "") + ": " + field + ": " +
                                    what);
  }
};

Status check_keys(const YAML::Node& map, const std::string& path, const std::set<std::string>& known,
                  const YamlWhere& w) {
  for (const auto& kv : map) {
    const std::string key = kv.first.Scalar();
    if (!known.count(key)) {
      return w.error(kv.first, path.empty() ? key : path + "." + key,
                     "unknown key (known: " + known_list(known) + ")");
    }
  }
  return Status::ok();
}

Status read_scalar_string(const YAML::Node& node, const std::string& field, const YamlWhere& w, std::string* out) {
  if (!node.IsScalar() || node.Scalar().empty()) return w.error(node, field, "must be a non-empty string");
  *out = node.Scalar();
  return Status::ok();
}

// `p` as given when absolute, else against the suite file's directory.
std::string resolve(const std::filesystem::path& suite_dir, const std::string& p) {
  const std::filesystem::path path(p);
  if (path.is_absolute() || suite_dir.empty()) return path.lexically_normal().string();
  return (suite_dir / path).lexically_normal().string();
}

Status parse_scenario(const std::string& name, const YAML::Node& node, const std::filesystem::path& dir,
                      const YamlWhere& w, ScenarioSpec* s) {
  const std::string path = "scenarios." + name;
  if (!node.IsMap()) return w.error(node, path, "must be a mapping {eval, max_tokens, stop}");
  LG_RETURN_IF_ERROR(check_keys(node, path, {"eval", "max_tokens", "stop"}, w));
  s->name = name;
  if (!node["eval"]) return w.error(node, path + ".eval", "missing (the eval JSONL file is required)");
  std::string eval;
  LG_RETURN_IF_ERROR(read_scalar_string(node["eval"], path + ".eval", w, &eval));
  s->eval_path = resolve(dir, eval);
  if (const YAML::Node mt = node["max_tokens"]; mt && !mt.IsNull()) {
    int64_t v = 0;
    bool ok = mt.IsScalar();
    try {
      if (ok) v = mt.as<int64_t>();
    } catch (const YAML::Exception&) {
      ok = false;
    }
    if (!ok || v < 1 || v > 65536) {
      return w.error(mt, path + ".max_tokens", "must be an integer in [1, 65536], got '" + YAML::Dump(mt) + "'");
    }
    s->max_tokens = static_cast<int32_t>(v);
  }
  if (const YAML::Node stop = node["stop"]; stop && !stop.IsNull()) {
    if (!stop.IsSequence()) return w.error(stop, path + ".stop", "must be a list of strings");
    for (size_t i = 0; i < stop.size(); ++i) {
      std::string one;
      LG_RETURN_IF_ERROR(read_scalar_string(stop[i], path + ".stop[" + std::to_string(i) + "]", w, &one));
      s->stop.push_back(std::move(one));
    }
  }
  LG_ASSIGN_OR_RETURN(s->items, load_eval_items(s->eval_path));
  return Status::ok();
}

Result<Suite> parse_suite(std::string text, const std::string& path) {
  Suite suite;
  suite.path = path;
  suite.text = std::move(text);
  const YamlWhere w{path};
  YAML::Node root;
  try {
    root = YAML::Load(suite.text);
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(path + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
  if (!root.IsMap()) return Status::invalid_argument(path + ": must be a mapping with scenarios (and generic)");
  LG_RETURN_IF_ERROR(check_keys(root, "", {"scenarios", "generic"}, w));
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();

  const YAML::Node scenarios = root["scenarios"];
  if (!scenarios || !scenarios.IsMap() || scenarios.size() == 0) {
    return w.error(scenarios ? scenarios : root, "scenarios", "must map at least one scenario name to {eval: PATH}");
  }
  std::set<std::string> seen;
  for (const auto& kv : scenarios) {
    const std::string name = kv.first.Scalar();
    // Gates report the base-quality set as "generic", so a scenario may not take the name.
    if (name.empty() || name == "generic") {
      return w.error(kv.first, "scenarios", "'" + name + "' is not a usable scenario name");
    }
    if (!seen.insert(name).second) return w.error(kv.first, "scenarios." + name, "duplicate scenario");
    ScenarioSpec spec;
    LG_RETURN_IF_ERROR(parse_scenario(name, kv.second, dir, w, &spec));
    suite.scenarios.push_back(std::move(spec));
  }

  if (const YAML::Node generic = root["generic"]; generic && !generic.IsNull()) {
    std::string p;
    LG_RETURN_IF_ERROR(read_scalar_string(generic, "generic", w, &p));
    suite.generic_path = resolve(dir, p);
    LG_ASSIGN_OR_RETURN(suite.generic, load_generic_items(suite.generic_path));
  }
  return suite;
}

}  // namespace

std::string suite_sha256(const Suite& suite) {
  return suite.content_sha256.empty() ? sha256_hex(suite.text) : suite.content_sha256;
}

Result<Suite> load_suite(const std::string& path) {
  LG_ASSIGN_OR_RETURN(std::string text, read_file(path, "suite file"));
  return parse_suite(std::move(text), path);
}

Result<std::vector<EvalItem>> load_eval_items(const std::string& path) {
  return load_jsonl<EvalItem>(path, "eval file", parse_eval_item);
}

Result<std::vector<GenericItem>> load_generic_items(const std::string& path) {
  return load_jsonl<GenericItem>(path, "generic file", parse_generic_item);
}

}  // namespace loragate::eval
