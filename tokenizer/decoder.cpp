#include "tokenizer/decoder.h"

#include "tokenizer/normalizer.h"
#include "tokenizer/unicode.h"

namespace loragate::tok {
namespace {

constexpr const char* kReplacementChar = "\xEF\xBF\xBD";

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }
  void token_bytes(std::string& token) const override {
    for (const auto& p : parts_) p->token_bytes(token);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::shared_ptr<const Regex> regex, std::string content)
      : regex_(std::move(regex)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      auto matches = regex_->find_all(t);
      if (matches.empty()) continue;
      std::string out;
      size_t prev = 0;
      for (auto [b, e] : matches) {
        out.append(t, prev, b - prev);
        out += content_;
        prev = e;
      }
      out.append(t, prev, std::string::npos);
      t = std::move(out);
    }
  }
  void token_bytes(std::string& token) const override {
    std::vector<std::string> one{std::move(token)};
    decode_chain(one);
    token = std::move(one.front());
  }

 private:
  std::shared_ptr<const Regex> regex_;
  std::string content_;
};

// "<0xNN>" tokens become bytes; a run of them that is not valid UTF-8 becomes
// one U+FFFD per byte (HF's rule, unlike from_utf8_lossy).
class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string bytes;
    auto flush = [&] {
      if (bytes.empty()) return;
      if (utf8_is_valid(bytes)) {
        out.push_back(bytes);
      } else {
        for (size_t i = 0; i < bytes.size(); ++i) out.emplace_back(kReplacementChar);
      }
      bytes.clear();
    };
    for (auto& t : tokens) {
      int value = byte_token_value(t);
      if (value >= 0) {
        bytes += static_cast<char>(value);
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
  void token_bytes(std::string& token) const override {
    if (const int value = byte_token_value(token); value >= 0) token.assign(1, static_cast<char>(value));
  }

 private:
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int byte_token_value(const std::string& t) {
    if (t.size() != 6 || !t.starts_with("<0x") || t[5] != '>') return -1;
    int hi = hex(t[3]), lo = hex(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
  void token_bytes(std::string&) const override {}
};

// Removes up to `start` leading and `stop` trailing `content` characters per token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::vector<size_t> starts;  // byte offset of each character
      for (size_t i = 0; i < t.size();) {
        starts.push_back(i);
        utf8_next(t, i);
      }
      auto char_at = [&](size_t k) {
        size_t i = starts[k];
        return utf8_next(t, i);
      };
      size_t n = starts.size(), cut_start = 0, cut_stop = n;
      for (size_t k = 0; k < start_ && k < n && char_at(k) == content_; ++k) cut_start = k + 1;
      for (size_t k = 0; k < stop_ && k < n && char_at(n - 1 - k) == content_; ++k) cut_stop = n - 1 - k;
      if (cut_stop < cut_start) cut_stop = cut_start;
      size_t b = cut_start < n ? starts[cut_start] : t.size();
      size_t e = cut_stop < n ? starts[cut_stop] : t.size();
      t = t.substr(b, e - b);
    }
  }
  // Strip acts on the text's ends (after Fuse, one string), never mid-text.
  void token_bytes(std::string&) const override {}

 private:
  char32_t content_;
  size_t start_, stop_;
};

// Byte-level alphabet back to bytes; a token with any character outside the
// alphabet is kept as its own UTF-8. The joined bytes are repaired lossily.
class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) {
      size_t mark = bytes.size();
      bool ok = true;
      for (size_t i = 0; i < t.size() && ok;) {
        int b = char_to_byte(utf8_next(t, i));
        if (b < 0) {
          ok = false;
        } else {
          bytes += static_cast<char>(b);
        }
      }
      if (!ok) {
        bytes.resize(mark);
        bytes += t;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
  void token_bytes(std::string& token) const override {
    std::string bytes;
    for (size_t i = 0; i < token.size();) {
      const int b = char_to_byte(utf8_next(token, i));
      if (b < 0) return;  // outside the alphabet: kept as its own UTF-8, as decode_chain does
      bytes += static_cast<char>(b);
    }
    token = std::move(bytes);
  }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first) : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      // In the first token every replacement goes (unless prepend_scheme is never).
      tokens[k] = replaced(tokens[k], (k == 0 && strip_first_) ? "" : " ");
    }
  }
  void token_bytes(std::string& token) const override { token = replaced(token, " "); }

 private:
  std::string replaced(const std::string& t, const char* with) const {
    std::string out;
    for (size_t i = 0; i < t.size();) {
      if (t.compare(i, replacement_.size(), replacement_) == 0) {
        out += with;
        i += replacement_.size();
      } else {
        out += t[i++];
      }
    }
    return out;
  }

  std::string replacement_;
  bool strip_first_;
};

// Classic BPE end-of-word suffix: the suffix becomes a space, except at the end.
class BpeSuffixDecoder final : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      const char* with = k + 1 == tokens.size() ? "" : " ";
      std::string out;
      const std::string& t = tokens[k];
      for (size_t i = 0; i < t.size();) {
        if (!suffix_.empty() && t.compare(i, suffix_.size(), suffix_) == 0) {
          out += with;
          i += suffix_.size();
        } else {
          out += t[i++];
        }
      }
      tokens[k] = std::move(out);
    }
  }
  void token_bytes(std::string& token) const override {
    std::vector<std::string> two{std::move(token), std::string()};  // not the last token: the suffix is a space
    decode_chain(two);
    token = std::move(two.front());
  }

 private:
  std::string suffix_;
};

}  // namespace

Result<std::unique_ptr<Decoder>> make_decoder(const Json& j, const std::string& where) {
  LG_ASSIGN_OR_RETURN(std::string type, json_type(j, where));
  if (type == "Sequence") {
    auto it = j.find("decoders");
    if (it == j.end() || !it->is_array()) return json_corrupt(json_key(where, "decoders"), "expected an array");
    std::vector<std::unique_ptr<Decoder>> parts;
    for (size_t i = 0; i < it->size(); ++i) {
      LG_ASSIGN_OR_RETURN(auto part, make_decoder((*it)[i], json_key(where, "decoders[" + std::to_string(i) + "]")));
      parts.push_back(std::move(part));
    }
    return std::unique_ptr<Decoder>(new SequenceDecoder(std::move(parts)));
  }
  if (type == "Replace") {
    auto it = j.find("pattern");
    if (it == j.end()) return json_corrupt(json_key(where, "pattern"), "missing");
    LG_ASSIGN_OR_RETURN(auto regex, make_pattern(*it, json_key(where, "pattern")));
    LG_ASSIGN_OR_RETURN(std::string content, json_string(j, "content", where));
    return std::unique_ptr<Decoder>(new ReplaceDecoder(std::move(regex), std::move(content)));
  }
  if (type == "ByteFallback") return std::unique_ptr<Decoder>(new ByteFallbackDecoder());
  if (type == "Fuse") return std::unique_ptr<Decoder>(new FuseDecoder());
  if (type == "ByteLevel") return std::unique_ptr<Decoder>(new ByteLevelDecoder());
  if (type == "Strip") {
    LG_ASSIGN_OR_RETURN(std::string content, json_string(j, "content", where));
    size_t i = 0;
    if (content.empty() || !utf8_is_valid(content) || (utf8_next(content, i), i != content.size())) {
      return json_corrupt(json_key(where, "content"), "expected one character");
    }
    i = 0;
    char32_t c = utf8_next(content, i);
    LG_ASSIGN_OR_RETURN(int64_t start, json_int_or(j, "start", 0, where));
    LG_ASSIGN_OR_RETURN(int64_t stop, json_int_or(j, "stop", 0, where));
    if (start < 0 || stop < 0) return json_corrupt(where, "start and stop must not be negative");
    return std::unique_ptr<Decoder>(new StripDecoder(c, static_cast<size_t>(start), static_cast<size_t>(stop)));
  }
  if (type == "Metaspace") {
    std::string replacement = "\xE2\x96\x81";
    LG_ASSIGN_OR_RETURN(replacement, json_string_or(j, "replacement", replacement, where));
    if (replacement.empty()) return json_corrupt(json_key(where, "replacement"), "empty");
    LG_ASSIGN_OR_RETURN(bool add_prefix_space, json_bool_or(j, "add_prefix_space", true, where));
    LG_ASSIGN_OR_RETURN(std::string scheme,
                        json_string_or(j, "prepend_scheme", add_prefix_space ? "always" : "never", where));
    return std::unique_ptr<Decoder>(new MetaspaceDecoder(replacement, scheme != "never"));
  }
  if (type == "BPEDecoder") {
    LG_ASSIGN_OR_RETURN(std::string suffix, json_string_or(j, "suffix", "</w>", where));
    return std::unique_ptr<Decoder>(new BpeSuffixDecoder(std::move(suffix)));
  }
  return Status::unsupported(json_key(where, "type") + ": decoder type '" + type + "' is not supported");
}

}  // namespace loragate::tok
