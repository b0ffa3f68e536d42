#include "tokenizer/normalizer.h"

#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace loragate::tok {
namespace {

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& text) const override {
    for (const auto& p : parts_) p->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);  // HF leaves an empty string empty
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(std::shared_ptr<const Regex> regex, std::string content)
      : regex_(std::move(regex)), content_(std::move(content)) {}
  void normalize(std::string& text) const override {
    auto matches = regex_->find_all(text);
    if (matches.empty()) return;
    std::string out;
    out.reserve(text.size() + matches.size() * content_.size());
    size_t prev = 0;
    for (auto [b, e] : matches) {
      out.append(text, prev, b - prev);
      out += content_;
      prev = e;
    }
    out.append(text, prev, std::string::npos);
    text = std::move(out);
  }

 private:
  std::shared_ptr<const Regex> regex_;
  std::string content_;
};

class FormNormalizer final : public Normalizer {
 public:
  explicit FormNormalizer(NormalForm form) : form_(form) {}
  void normalize(std::string& text) const override { text = normalize_form(text, form_); }

 private:
  NormalForm form_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override { text = to_lower(text); }
};

class StripAccentsNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override { text = strip_accents(text); }
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t i = begin;
        if (!is_white_space(utf8_next(text, i))) break;
        begin = i;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
        size_t i = start;
        if (!is_white_space(utf8_next(text, i))) break;
        end = start;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

}  // namespace

Result<std::shared_ptr<const Regex>> make_pattern(const Json& j, const std::string& where) {
  if (!j.is_object()) return json_corrupt(where, "expected {\"String\": ...} or {\"Regex\": ...}");
  bool literal = j.contains("String");
  const char* key = literal ? "String" : "Regex";
  LG_ASSIGN_OR_RETURN(std::string source, json_string(j, key, where));
  if (literal && source.empty()) return json_corrupt(json_key(where, key), "empty pattern");
  auto regex = Regex::compile(source, literal);
  if (!regex.is_ok()) return json_corrupt(json_key(where, key), regex.status().message());
  return regex;
}

Result<std::unique_ptr<Normalizer>> make_normalizer(const Json& j, const std::string& where) {
  LG_ASSIGN_OR_RETURN(std::string type, json_type(j, where));
  if (type == "Sequence") {
    auto it = j.find("normalizers");
    if (it == j.end() || !it->is_array()) return json_corrupt(json_key(where, "normalizers"), "expected an array");
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < it->size(); ++i) {
      LG_ASSIGN_OR_RETURN(auto part, make_normalizer((*it)[i], json_key(where, "normalizers[" + std::to_string(i) + "]")));
      parts.push_back(std::move(part));
    }
    return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(parts)));
  }
  if (type == "Prepend") {
    LG_ASSIGN_OR_RETURN(std::string prefix, json_string(j, "prepend", where));
    return std::unique_ptr<Normalizer>(new PrependNormalizer(std::move(prefix)));
  }
  if (type == "Replace") {
    auto it = j.find("pattern");
    if (it == j.end()) return json_corrupt(json_key(where, "pattern"), "missing");
    LG_ASSIGN_OR_RETURN(auto regex, make_pattern(*it, json_key(where, "pattern")));
    LG_ASSIGN_OR_RETURN(std::string content, json_string(j, "content", where));
    return std::unique_ptr<Normalizer>(new ReplaceNormalizer(std::move(regex), std::move(content)));
  }
  if (type == "NFC") return std::unique_ptr<Normalizer>(new FormNormalizer(NormalForm::kNFC));
  if (type == "NFD") return std::unique_ptr<Normalizer>(new FormNormalizer(NormalForm::kNFD));
  if (type == "NFKC") return std::unique_ptr<Normalizer>(new FormNormalizer(NormalForm::kNFKC));
  if (type == "NFKD") return std::unique_ptr<Normalizer>(new FormNormalizer(NormalForm::kNFKD));
  if (type == "Lowercase") return std::unique_ptr<Normalizer>(new LowercaseNormalizer());
  if (type == "StripAccents") return std::unique_ptr<Normalizer>(new StripAccentsNormalizer());
  if (type == "Strip") {
    LG_ASSIGN_OR_RETURN(bool left, json_bool_or(j, "strip_left", true, where));
    LG_ASSIGN_OR_RETURN(bool right, json_bool_or(j, "strip_right", true, where));
    return std::unique_ptr<Normalizer>(new StripNormalizer(left, right));
  }
  return Status::unsupported(json_key(where, "type") + ": normalizer type '" + type + "' is not supported");
}

}  // namespace loragate::tok
