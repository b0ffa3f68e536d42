#include "chat/jinja_lexer.h"

#include <cctype>
#include <cstdint>

#include "chat/jinja_value.h"
#include "common/utf8.h"

namespace loragate::jinja {

std::string describe_position(const std::string& source, std::size_t pos) {
  std::size_t line = 1, col = 1;
  for (std::size_t k = 0; k < pos && k < source.size(); ++k) {
    if (source[k] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

class Lexer {
 public:
  explicit Lexer(const std::string& src) : src_(src) {
    end_ = src_.size();
    if (end_ > 0 && src_[end_ - 1] == '\n') --end_;  // keep_trailing_newline=False
  }

  std::vector<Token> run() {
    std::size_t pos = 0;
    while (pos < end_) {
      std::size_t p = find_tag(pos);
      std::string text = src_.substr(pos, (p == std::string::npos ? end_ : p) - pos);
      if (p == std::string::npos) {
        push_text(std::move(text), pos);
        break;
      }
      char kind = src_[p + 1];
      char marker = p + 2 < end_ ? src_[p + 2] : '\0';
      if (marker == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (marker != '+' && (kind == '%' || kind == '#')) {
        lstrip(text, p);
      }
      push_text(std::move(text), pos);
      std::size_t body = p + 2 + ((marker == '-' || marker == '+') ? 1 : 0);
      if (kind == '#') {
        pos = lex_comment(p, body);
      } else {
        pos = lex_tag(p, body, kind);
      }
    }
    tokens_.push_back({TokenType::kEof, "", end_});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(const std::string& msg, std::size_t pos) {
    throw TemplateError(StatusCode::kCorrupt, "template syntax error at " + describe_position(src_, pos) + ": " + msg);
  }

  std::size_t find_tag(std::size_t from) const {
    for (std::size_t k = from; k + 1 < end_; ++k)
      if (src_[k] == '{' && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#')) return k;
    return std::string::npos;
  }

  void push_text(std::string text, std::size_t pos) {
    if (!text.empty()) tokens_.push_back({TokenType::kText, std::move(text), pos});
  }

  // lstrip_blocks: spaces/tabs between the start of the line and the tag go.
  void lstrip(std::string& text, std::size_t tag) const {
    std::size_t k = tag;
    while (k > 0 && (src_[k - 1] == ' ' || src_[k - 1] == '\t')) --k;
    if (k != 0 && src_[k - 1] != '\n') return;
    std::size_t n = tag - k;
    std::size_t trailing = 0;
    while (trailing < text.size() && (text[text.size() - 1 - trailing] == ' ' || text[text.size() - 1 - trailing] == '\t'))
      ++trailing;
    text.resize(text.size() - std::min(n, trailing));
  }

  // Whitespace after a closing delimiter: '-' strips all, trim_blocks one newline.
  std::size_t after_close(std::size_t pos, char marker, bool trim_newline) const {
    if (marker == '-') {
      while (pos < end_ && is_space(src_[pos])) ++pos;
    } else if (marker != '+' && trim_newline && pos < end_ && src_[pos] == '\n') {
      ++pos;
    }
    return pos;
  }

  std::size_t lex_comment(std::size_t start, std::size_t body) {
    std::size_t close = src_.find("#}", body);
    if (close == std::string::npos || close + 2 > end_) fail("unclosed comment", start);
    char marker = (close > body && (src_[close - 1] == '-' || src_[close - 1] == '+')) ? src_[close - 1] : '\0';
    return after_close(close + 2, marker, true);
  }

  std::size_t lex_tag(std::size_t start, std::size_t pos, char kind) {
    tokens_.push_back({kind == '{' ? TokenType::kVarBegin : TokenType::kBlockBegin, "", start});
    std::size_t first_token = tokens_.size();
    int depth = 0;
    const char close_char = kind == '{' ? '}' : '%';
    while (true) {
      while (pos < end_ && is_space(src_[pos])) ++pos;
      if (pos >= end_) fail(kind == '{' ? "unexpected end of template, expected '}}'" : "unexpected end of template, expected '%}'", start);
      char c = src_[pos];
      // Closing delimiter, possibly with a whitespace-control marker.
      if (depth == 0) {
        auto at = [&](std::size_t k, char ch) { return k < end_ && src_[k] == ch; };
        char marker = '\0';
        std::size_t q = pos;
        if ((c == '-' || c == '+') && at(pos + 1, close_char) && at(pos + 2, '}')) {
          marker = c;
          q = pos + 1;
        }
        if (at(q, close_char) && at(q + 1, '}')) {
          tokens_.push_back({kind == '{' ? TokenType::kVarEnd : TokenType::kBlockEnd, "", q});
          std::size_t next = after_close(q + 2, marker, kind == '%');
          if (kind == '%' && tokens_.size() == first_token + 2 && tokens_[first_token].type == TokenType::kName &&
              tokens_[first_token].text == "raw")
            return lex_raw(next, start);
          return next;
        }
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t b = pos;
        while (pos < end_ && (std::isalnum(static_cast<unsigned char>(src_[pos])) || src_[pos] == '_')) ++pos;
        tokens_.push_back({TokenType::kName, src_.substr(b, pos - b), b});
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        pos = lex_number(pos);
      } else if (c == '\'' || c == '"') {
        pos = lex_string(pos);
      } else {
        static const char* const kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                           ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};
        bool matched = false;
        for (const char* op : kOps) {
          std::size_t n = std::char_traits<char>::length(op);
          if (src_.compare(pos, n, op) == 0) {
            if (op[0] == '{' || op[0] == '(' || op[0] == '[') ++depth;
            if ((op[0] == '}' || op[0] == ')' || op[0] == ']') && depth > 0) --depth;
            tokens_.push_back({TokenType::kOp, op, pos});
            pos += n;
            matched = true;
            break;
          }
        }
        if (!matched) fail(std::string("unexpected character '") + c + "'", pos);
      }
    }
  }

  std::size_t lex_number(std::size_t pos) {
    std::size_t b = pos;
    while (pos < end_ && (std::isdigit(static_cast<unsigned char>(src_[pos])) || src_[pos] == '_')) ++pos;
    bool is_float = false;
    bool after_dot = !tokens_.empty() && tokens_.back().type == TokenType::kOp && tokens_.back().text == ".";
    if (!after_dot && pos + 1 < end_ && src_[pos] == '.' && std::isdigit(static_cast<unsigned char>(src_[pos + 1]))) {
      is_float = true;
      ++pos;
      while (pos < end_ && (std::isdigit(static_cast<unsigned char>(src_[pos])) || src_[pos] == '_')) ++pos;
    }
    if (!after_dot && pos < end_ && (src_[pos] == 'e' || src_[pos] == 'E')) {
      std::size_t q = pos + 1;
      if (q < end_ && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < end_ && std::isdigit(static_cast<unsigned char>(src_[q]))) {
        is_float = true;
        pos = q;
        while (pos < end_ && std::isdigit(static_cast<unsigned char>(src_[pos]))) ++pos;
      }
    }
    std::string text;
    for (std::size_t k = b; k < pos; ++k)
      if (src_[k] != '_') text += src_[k];
    tokens_.push_back({is_float ? TokenType::kFloat : TokenType::kInt, text, b});
    return pos;
  }

  // Python string literal escapes (Jinja decodes literals with unicode-escape).
  std::size_t lex_string(std::size_t pos) {
    std::size_t b = pos;
    char quote = src_[pos++];
    std::string out;
    while (true) {
      if (pos >= end_) fail("unterminated string literal", b);
      char c = src_[pos++];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= end_) fail("unterminated string literal", b);
      char e = src_[pos++];
      auto hex = [&](int n) {
        std::uint32_t cp = 0;
        for (int k = 0; k < n; ++k) {
          if (pos >= end_ || !std::isxdigit(static_cast<unsigned char>(src_[pos]))) fail("truncated \\x/\\u escape", b);
          char h = src_[pos++];
          cp = cp * 16 + static_cast<std::uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        return cp;
      };
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case 'a': out += '\a'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;  // line continuation
        case 'x': utf8_append(out, hex(2)); break;
        case 'u': utf8_append(out, hex(4)); break;
        case 'U': utf8_append(out, hex(8)); break;
        default:
          if (e >= '0' && e <= '7') {
            std::uint32_t cp = static_cast<std::uint32_t>(e - '0');
            for (int k = 0; k < 2 && pos < end_ && src_[pos] >= '0' && src_[pos] <= '7'; ++k)
              cp = cp * 8 + static_cast<std::uint32_t>(src_[pos++] - '0');
            utf8_append(out, cp);
          } else {  // unknown escapes keep their backslash, as in Python
            out += '\\';
            out += e;
          }
      }
    }
    tokens_.push_back({TokenType::kString, std::move(out), b});
    return pos;
  }

  // {% raw %}...{% endraw %}: the body is text, untouched.
  std::size_t lex_raw(std::size_t pos, std::size_t start) {
    for (std::size_t k = pos; k + 1 < end_; ++k) {
      if (src_[k] != '{' || src_[k + 1] != '%') continue;
      std::size_t q = k + 2;
      char open_marker = (q < end_ && (src_[q] == '-' || src_[q] == '+')) ? src_[q] : '\0';
      if (open_marker) ++q;
      while (q < end_ && is_space(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (q < end_ && is_space(src_[q])) ++q;
      char close_marker = '\0';
      if (q < end_ && (src_[q] == '-' || src_[q] == '+')) close_marker = src_[q++];
      if (src_.compare(q, 2, "%}") != 0) continue;
      std::string text = src_.substr(pos, k - pos);
      if (open_marker == '-')
        while (!text.empty() && is_space(text.back())) text.pop_back();
      else if (open_marker != '+')
        lstrip(text, k);
      push_text(std::move(text), pos);
      tokens_.push_back({TokenType::kBlockBegin, "", k});
      tokens_.push_back({TokenType::kName, "endraw", k});
      tokens_.push_back({TokenType::kBlockEnd, "", q});
      return after_close(q + 2, close_marker, true);
    }
    fail("missing {% endraw %}", start);
  }

  const std::string& src_;
  std::size_t end_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(source).run(); }

}  // namespace loragate::jinja
