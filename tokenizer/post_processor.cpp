#include "tokenizer/post_processor.h"

namespace loragate::tok {

Result<PostProcessor> PostProcessor::make(const Json& j, const std::string& where) {
  PostProcessor p;
  if (!j.is_null()) LG_RETURN_IF_ERROR(p.add(j, where));
  return p;
}

namespace {
// RobertaProcessing / BertProcessing give tokens as ["<s>", 0].
Result<int32_t> pair_id(const Json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_integer()) {
    return json_corrupt(json_key(where, key), "expected [\"token\", id]");
  }
  return (*it)[1].get<int32_t>();
}
}  // namespace

Status PostProcessor::add(const Json& j, const std::string& where) {
  LG_ASSIGN_OR_RETURN(std::string type, json_type(j, where));
  if (type == "ByteLevel") return Status::ok();  // only trims offsets
  if (type == "Sequence") {
    auto it = j.find("processors");
    if (it == j.end() || !it->is_array()) return json_corrupt(json_key(where, "processors"), "expected an array");
    for (size_t i = 0; i < it->size(); ++i) {
      LG_RETURN_IF_ERROR(add((*it)[i], json_key(where, "processors[" + std::to_string(i) + "]")));
    }
    return Status::ok();
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    LG_ASSIGN_OR_RETURN(int32_t cls, pair_id(j, "cls", where));
    LG_ASSIGN_OR_RETURN(int32_t sep, pair_id(j, "sep", where));
    steps_.push_back({{cls}, {sep}});
    return Status::ok();
  }
  if (type != "TemplateProcessing") {
    return Status::unsupported(json_key(where, "type") + ": post_processor type '" + type + "' is not supported");
  }
  auto single = j.find("single");
  if (single == j.end() || !single->is_array()) return json_corrupt(json_key(where, "single"), "expected an array");
  auto specials = j.find("special_tokens");
  Template t;
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const Json& item = (*single)[i];
    std::string key = json_key(where, "single[" + std::to_string(i) + "]");
    if (item.is_object() && item.contains("Sequence")) {
      if (seen_sequence) return Status::unsupported(key + ": a single template with two sequences");
      seen_sequence = true;
      continue;
    }
    if (!item.is_object() || !item.contains("SpecialToken") || !item["SpecialToken"].is_object()) {
      return json_corrupt(key, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
    LG_ASSIGN_OR_RETURN(std::string name, json_string(item["SpecialToken"], "id", key + ".SpecialToken"));
    if (specials == j.end() || !specials->is_object() || !specials->contains(name)) {
      return json_corrupt(json_key(where, "special_tokens"), "no entry for '" + name + "'");
    }
    const Json& entry = (*specials)[name];
    auto ids = entry.find("ids");
    if (ids == entry.end() || !ids->is_array()) {
      return json_corrupt(json_key(where, "special_tokens[\"" + name + "\"].ids"), "expected an array");
    }
    for (const auto& id : *ids) {
      if (!id.is_number_integer()) {
        return json_corrupt(json_key(where, "special_tokens[\"" + name + "\"].ids"), "expected integers");
      }
      (seen_sequence ? t.after : t.before).push_back(id.get<int32_t>());
    }
  }
  if (!seen_sequence) return json_corrupt(json_key(where, "single"), "has no $A sequence");
  steps_.push_back(std::move(t));
  return Status::ok();
}

std::vector<int32_t> PostProcessor::process(const std::vector<int32_t>& ids) const {
  std::vector<int32_t> out = ids;
  for (const auto& t : steps_) {
    std::vector<int32_t> wrapped;
    wrapped.reserve(out.size() + t.before.size() + t.after.size());
    wrapped.insert(wrapped.end(), t.before.begin(), t.before.end());
    wrapped.insert(wrapped.end(), out.begin(), out.end());
    wrapped.insert(wrapped.end(), t.after.begin(), t.after.end());
    out = std::move(wrapped);
  }
  return out;
}

bool PostProcessor::adds_tokens() const {
  for (const auto& t : steps_) {
    if (!t.before.empty() || !t.after.empty()) return true;
  }
  return false;
}

std::optional<int32_t> PostProcessor::leading_id() const {
  for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) {
    if (!it->before.empty()) return it->before.front();
  }
  return std::nullopt;
}

std::optional<int32_t> PostProcessor::trailing_id() const {
  for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) {
    if (!it->after.empty()) return it->after.back();
  }
  return std::nullopt;
}

}  // namespace loragate::tok
