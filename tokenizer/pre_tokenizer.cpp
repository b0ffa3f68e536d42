#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "tokenizer/normalizer.h"
#include "tokenizer/unicode.h"

namespace loragate::tok {

std::vector<std::pair<size_t, size_t>> split_ranges(std::string_view text, const Regex& regex,
                                                    SplitBehavior behavior, bool invert) {
  // Every byte of `text` lands in one (range, is_match) entry, gaps included.
  struct Span {
    size_t b, e;
    bool match;
  };
  std::vector<Span> spans;
  size_t prev = 0;
  for (auto [b, e] : regex.find_all(text)) {
    if (prev != b) spans.push_back({prev, b, invert});
    spans.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != text.size()) spans.push_back({prev, text.size(), invert});

  std::vector<Span> merged;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      merged = spans;
      for (auto& s : merged) s.match = false;
      break;
    case SplitBehavior::kRemoved:
      merged = spans;  // matches are dropped below
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const auto& s : spans) {
        if (s.match && !previous_match && !merged.empty()) {
          merged.back().e = s.e;
        } else {
          merged.push_back({s.b, s.e, false});
        }
        previous_match = s.match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous_match && !merged.empty()) {
          merged.back().b = it->b;
        } else {
          merged.push_back({it->b, it->e, false});
        }
        previous_match = it->match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    case SplitBehavior::kContiguous:
      for (const auto& s : spans) {
        if (s.match == previous_match && !merged.empty()) {
          merged.back().e = s.e;
        } else {
          merged.push_back({s.b, s.e, false});
        }
        previous_match = s.match;
      }
      break;
  }
  std::vector<std::pair<size_t, size_t>> out;
  out.reserve(merged.size());
  for (const auto& s : merged) {
    if (!s.match && s.b != s.e) out.emplace_back(s.b, s.e);
  }
  return out;
}

namespace {

// Splits every piece by `regex`; the first sub-piece keeps the origin flag.
void split_pieces(std::vector<Piece>& pieces, const Regex& regex, SplitBehavior behavior, bool invert) {
  std::vector<Piece> out;
  out.reserve(pieces.size() * 2);
  for (auto& p : pieces) {
    for (auto [b, e] : split_ranges(p.text, regex, behavior, invert)) {
      out.push_back({p.text.substr(b, e - b), p.at_origin && b == 0});
    }
  }
  pieces = std::move(out);
}

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (const auto& p : parts_) p->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(std::shared_ptr<const Regex> regex, SplitBehavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override { split_pieces(pieces, *regex_, behavior_, invert_); }

 private:
  std::shared_ptr<const Regex> regex_;
  SplitBehavior behavior_;
  bool invert_;
};

// GPT-2's pattern, used by ByteLevel with use_regex.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::shared_ptr<const Regex> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    if (add_prefix_space_) {
      for (auto& p : pieces) {
        if (!p.text.starts_with(' ')) p.text = " " + p.text;
      }
    }
    if (regex_) split_pieces(pieces, *regex_, SplitBehavior::kIsolated, false);
    // Every byte becomes one printable character of the byte-level alphabet.
    const auto& table = byte_to_char();
    for (auto& p : pieces) {
      std::string mapped;
      mapped.reserve(p.text.size() * 2);
      for (char c : p.text) utf8_append(mapped, table[static_cast<uint8_t>(c)]);
      p.text = std::move(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  std::shared_ptr<const Regex> regex_;  // null without use_regex
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, std::shared_ptr<const Regex> splitter)
      : replacement_(std::move(replacement)), scheme_(scheme), splitter_(std::move(splitter)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (auto& p : pieces) {
      std::string replaced;
      replaced.reserve(p.text.size() + replacement_.size());
      for (char c : p.text) {
        if (c == ' ') {
          replaced += replacement_;
        } else {
          replaced += c;
        }
      }
      bool prepend = scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && p.at_origin);
      if (prepend && !replaced.starts_with(replacement_)) replaced = replacement_ + replaced;
      p.text = std::move(replaced);
    }
    if (splitter_) split_pieces(pieces, *splitter_, SplitBehavior::kMergedWithNext, false);
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  std::shared_ptr<const Regex> splitter_;  // null when split is false
};

Result<std::shared_ptr<const Regex>> compile_at(std::string_view pattern, bool literal, const std::string& where) {
  auto regex = Regex::compile(pattern, literal);
  if (!regex.is_ok()) return json_corrupt(where, regex.status().message());
  return regex;
}

Result<SplitBehavior> parse_behavior(const Json& j, const std::string& where) {
  LG_ASSIGN_OR_RETURN(std::string name, json_string(j, "behavior", where));
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return json_corrupt(json_key(where, "behavior"), "unknown split behavior '" + name + "'");
}

std::unique_ptr<PreTokenizer> make_split(std::shared_ptr<const Regex> regex, SplitBehavior behavior, bool invert) {
  return std::make_unique<SplitPreTokenizer>(std::move(regex), behavior, invert);
}

}  // namespace

Result<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(const Json& j, const std::string& where) {
  LG_ASSIGN_OR_RETURN(std::string type, json_type(j, where));
  if (type == "Sequence") {
    auto it = j.find("pretokenizers");
    if (it == j.end() || !it->is_array()) return json_corrupt(json_key(where, "pretokenizers"), "expected an array");
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < it->size(); ++i) {
      LG_ASSIGN_OR_RETURN(auto part,
                          make_pre_tokenizer((*it)[i], json_key(where, "pretokenizers[" + std::to_string(i) + "]")));
      parts.push_back(std::move(part));
    }
    return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(parts)));
  }
  if (type == "Split") {
    auto it = j.find("pattern");
    if (it == j.end()) return json_corrupt(json_key(where, "pattern"), "missing");
    LG_ASSIGN_OR_RETURN(auto regex, make_pattern(*it, json_key(where, "pattern")));
    LG_ASSIGN_OR_RETURN(SplitBehavior behavior, parse_behavior(j, where));
    LG_ASSIGN_OR_RETURN(bool invert, json_bool_or(j, "invert", false, where));
    return make_split(std::move(regex), behavior, invert);
  }
  if (type == "ByteLevel") {
    LG_ASSIGN_OR_RETURN(bool add_prefix_space, json_bool_or(j, "add_prefix_space", true, where));
    LG_ASSIGN_OR_RETURN(bool use_regex, json_bool_or(j, "use_regex", true, where));
    std::shared_ptr<const Regex> regex;
    if (use_regex) {
      LG_ASSIGN_OR_RETURN(regex, compile_at(kGpt2Pattern, false, where));
    }
    return std::unique_ptr<PreTokenizer>(new ByteLevelPreTokenizer(add_prefix_space, std::move(regex)));
  }
  if (type == "Metaspace") {
    std::string replacement = "\xE2\x96\x81";  // ▁
    LG_ASSIGN_OR_RETURN(replacement, json_string_or(j, "replacement", replacement, where));
    if (replacement.empty()) return json_corrupt(json_key(where, "replacement"), "empty");
    // Older files say add_prefix_space instead of prepend_scheme.
    LG_ASSIGN_OR_RETURN(bool add_prefix_space, json_bool_or(j, "add_prefix_space", true, where));
    LG_ASSIGN_OR_RETURN(std::string scheme_name,
                        json_string_or(j, "prepend_scheme", add_prefix_space ? "always" : "never", where));
    PrependScheme scheme;
    if (scheme_name == "always") {
      scheme = PrependScheme::kAlways;
    } else if (scheme_name == "first") {
      scheme = PrependScheme::kFirst;
    } else if (scheme_name == "never") {
      scheme = PrependScheme::kNever;
    } else {
      return json_corrupt(json_key(where, "prepend_scheme"), "unknown scheme '" + scheme_name + "'");
    }
    LG_ASSIGN_OR_RETURN(bool split, json_bool_or(j, "split", true, where));
    std::shared_ptr<const Regex> splitter;
    if (split) {
      LG_ASSIGN_OR_RETURN(splitter, compile_at(replacement, true, where));
    }
    return std::unique_ptr<PreTokenizer>(new MetaspacePreTokenizer(replacement, scheme, std::move(splitter)));
  }
  if (type == "Digits") {
    LG_ASSIGN_OR_RETURN(bool individual, json_bool_or(j, "individual_digits", false, where));
    LG_ASSIGN_OR_RETURN(auto regex, compile_at("\\p{N}", false, where));
    return make_split(std::move(regex), individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous, false);
  }
  if (type == "Whitespace") {
    LG_ASSIGN_OR_RETURN(auto regex, compile_at("\\w+|[^\\w\\s]+", false, where));
    return make_split(std::move(regex), SplitBehavior::kRemoved, true);
  }
  if (type == "WhitespaceSplit") {
    LG_ASSIGN_OR_RETURN(auto regex, compile_at("\\s+", false, where));
    return make_split(std::move(regex), SplitBehavior::kRemoved, false);
  }
  return Status::unsupported(json_key(where, "type") + ": pre_tokenizer type '" + type + "' is not supported");
}

}  // namespace loragate::tok
