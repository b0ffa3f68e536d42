// The JSONL files of a suite: eval items and generic rows (eval_items.h).
#include "evaluator/eval_items.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <set>

#include "common/json_kind.h"
#include "common/path_roots.h"
#include "evaluator/metrics.h"

namespace loragate::eval {
namespace {

using nlohmann::json;

std::string item_known_list(const std::set<std::string>& known) {
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

// A key of the file as errors name it: a plain name as it is, anything else not at all.
std::string item_key_name(const std::string& key) {
  const bool plain = !key.empty() && key.size() <= 40 && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  return plain ? key : "(a key that is not a plain name)";
}

Status read_string(const json& obj, const char* key, const Where& w, bool required, std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return required ? w.error(key, "missing (a string is required)") : Status::ok();
  if (!it->is_string()) return w.error(key, "must be a string, got " + json_kind_name(*it));
  *out = it->get<std::string>();
  return Status::ok();
}

// Integers only: 3.0, "3" and true are refused.
Status read_int(const json& v, const std::string& field, const Where& w, int64_t min, int64_t max, int64_t* out) {
  const std::string want = "must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (!v.is_number_integer()) return w.error(field, want + ", got " + json_kind_name(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return w.error(field, want + ", got one above it");
  }
  const int64_t x = v.get<int64_t>();
  if (x < min || x > max) return w.error(field, want + ", got one " + (x < min ? "below" : "above") + " it");
  *out = x;
  return Status::ok();
}

Status read_ids(const json& obj, const char* key, const Where& w, std::vector<int32_t>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::ok();
  if (!it->is_array()) return w.error(key, "must be a list of token ids, got " + json_kind_name(*it));
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
      return w.error(field + ".role", "must be one of " + item_known_list(kRoles));
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
    return w.error(field, want + ", got " + json_kind_name(*it));
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json& word = (*it)[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    if (!word.is_string()) return w.error(at, "must be a string, got " + json_kind_name(word));
    const std::string s = word.get<std::string>();
    const bool alpha = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
      return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    });
    if (!alpha) return w.error(at, "can never match: words are compared as maximal [A-Za-z]+ runs");
    out->push_back(s);
  }
  return Status::ok();
}

Status read_keyword(const json& obj, const Where& w, KeywordRule* rule) {
  auto it = obj.find("keyword");
  if (it == obj.end() || it->is_null()) return Status::ok();
  const json& kw = *it;
  if (!kw.is_object()) return w.error("keyword", "must be an object with a type, got " + json_kind_name(kw));
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
    return w.error("keyword.type", "unknown type (expected include_exclude, prefix or regex)");
  }
  // A misspelt key would silently weaken the rule, so keys the type does not use are refused.
  for (auto k = kw.begin(); k != kw.end(); ++k) {
    if (!known.count(k.key())) {
      return w.error("keyword." + item_key_name(k.key()),
                     "unknown key for type " + type + " (known: " + item_known_list(known) + ")");
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
      if (compiled.is_ok()) return compiled;
      // PCRE2's reason and offset, without the pattern it quotes.
      std::string reason = compiled.message();
      const std::string quoted = "bad regex /" + rule->pattern + "/";
      if (reason.starts_with(quoted)) reason = "bad regex" + reason.substr(quoted.size());
      return w.error("keyword.pattern", reason);
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

// Parses `text` one JSON object per non-blank line with `parse` and refuses
// repeated ids, over-long lines and more than kMaxItemsPerFile items. T has an `id`.
template <typename T>
Result<std::vector<T>> parse_jsonl(std::string_view text, const std::string& path, const std::string& what,
                                   const std::function<Result<T>(const json&, const Where&)>& parse) {
  std::vector<T> items;
  std::map<std::string, size_t> first_line;  // id -> line
  size_t number = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t eol = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, eol - at);
    at = eol + 1;
    ++number;
    const Where w{path, number};
    if (line.size() > kMaxLineBytes) {
      return w.error("", "the line is " + std::to_string(line.size()) + " bytes, over the limit of " +
                             std::to_string(kMaxLineBytes));
    }
    if (number == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);  // UTF-8 BOM
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    json obj;
    try {
      obj = json::parse(line);
    } catch (const json::parse_error& e) {
      // The position only: nlohmann's message quotes the bytes it last read.
      return w.error("", "invalid JSON at column " + std::to_string(e.byte));
    } catch (const json::exception&) {
      // out_of_range from a number such as 1e999 (found by fuzz_generic_items): it escaped
      // the parse_error catch and terminated the server.
      return w.error("", "invalid JSON: a number out of range");
    }
    if (!obj.is_object()) return w.error("", "must be a JSON object, got " + json_kind_name(obj));
    if (items.size() == kMaxItemsPerFile) {
      return w.error("", "more than " + std::to_string(kMaxItemsPerFile) + " items in one " + what);
    }
    LG_ASSIGN_OR_RETURN(T item, parse(obj, w));
    auto [it, fresh] = first_line.emplace(item.id, number);
    if (!fresh) return w.error("id", "duplicate id (first on line " + std::to_string(it->second) + ")");
    items.push_back(std::move(item));
  }
  if (items.empty()) return Status::invalid_argument(path + ": no items: the " + what + " has no non-blank line");
  return items;
}

}  // namespace

Result<std::vector<EvalItem>> parse_eval_items(std::string_view text, const std::string& path) {
  return parse_jsonl<EvalItem>(text, path, "eval file", parse_eval_item);
}

Result<std::vector<GenericItem>> parse_generic_items(std::string_view text, const std::string& path) {
  return parse_jsonl<GenericItem>(text, path, "generic file", parse_generic_item);
}

Result<std::vector<EvalItem>> load_eval_items(const std::string& path, const std::vector<std::string>& roots) {
  LG_ASSIGN_OR_RETURN(std::string text, read_regular_file(path, kMaxItemFileBytes, "eval file", roots));
  return parse_eval_items(text, path);
}

Result<std::vector<GenericItem>> load_generic_items(const std::string& path, const std::vector<std::string>& roots) {
  LG_ASSIGN_OR_RETURN(std::string text, read_regular_file(path, kMaxItemFileBytes, "generic file", roots));
  return parse_generic_items(text, path);
}

}  // namespace loragate::eval
