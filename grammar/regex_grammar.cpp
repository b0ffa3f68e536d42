#include "grammar/regex_grammar.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "grammar/rule_writer.h"

namespace loragate::grammar {
namespace {

constexpr char32_t kRegexMaxCodePoint = 0x10FFFF;

// ECMA-262's character class escapes.
CodePointRanges regex_digit_ranges() { return {{'0', '9'}}; }
CodePointRanges regex_word_ranges() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
CodePointRanges regex_space_ranges() {
  return {{'\t', '\r'}, {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
          {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
}

CodePointRanges regex_complement(CodePointRanges ranges) {
  std::sort(ranges.begin(), ranges.end());
  CodePointRanges out;
  char32_t next = 0;
  for (auto [lo, hi] : ranges) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = std::max<char32_t>(next, hi + 1);
  }
  if (next <= kRegexMaxCodePoint) out.emplace_back(next, kRegexMaxCodePoint);
  return out;
}

class RegexCompiler {
 public:
  explicit RegexCompiler(std::string_view pattern) : text_(pattern), writer_("regex") {}

  Result<Grammar> compile() {
    LG_ASSIGN_OR_RETURN(std::vector<Alternative> alts, parse_alternation(0));
    if (!at_end()) return error("unmatched ')'");
    LG_ASSIGN_OR_RETURN(const int32_t root, writer_.add_rule("regex"));
    for (Alternative& alt : alts) LG_RETURN_IF_ERROR(writer_.add_alternative(root, std::move(alt)));
    return writer_.build(root);
  }

 private:
  Status error_at(size_t at, const std::string& what) const {
    return Status::invalid_argument("regex position " + std::to_string(at + 1) + ": " + what);
  }
  Status error(const std::string& what) const { return error_at(pos_, what); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  bool at_end() const { return pos_ >= text_.size(); }
  bool starts_with(std::string_view s) const { return text_.substr(pos_, s.size()) == s; }

  Result<std::vector<Alternative>> parse_alternation(int depth) {
    std::vector<Alternative> alts;
    LG_ASSIGN_OR_RETURN(Alternative first, parse_sequence(depth));
    alts.push_back(std::move(first));
    while (peek() == '|') {
      ++pos_;
      LG_ASSIGN_OR_RETURN(Alternative next, parse_sequence(depth));
      alts.push_back(std::move(next));
    }
    return alts;
  }

  Result<Alternative> parse_sequence(int depth) {
    Alternative seq;
    std::optional<size_t> last;  // where the last atom starts in seq
    bool quantified = false;     // the last atom already has a quantifier
    while (!at_end() && peek() != '|' && peek() != ')') {
      const char c = peek();
      if (c == '^') {
        // Only as the first thing of a top-level alternative, where it changes nothing.
        const bool leading = depth == 0 && seq.empty() && !last && (pos_ == 0 || text_[pos_ - 1] == '|');
        if (!leading) return error("'^' is only supported at the start of the pattern (anchors elsewhere are not)");
        ++pos_;
        continue;
      }
      if (c == '$') {
        const bool trailing = depth == 0 && (pos_ + 1 == text_.size() || text_[pos_ + 1] == '|');
        if (!trailing) return error("'$' is only supported at the end of the pattern (anchors elsewhere are not)");
        ++pos_;
        continue;
      }
      int64_t min = 0, max = -1;
      const size_t quantifier_at = pos_;
      LG_ASSIGN_OR_RETURN(const bool is_quantifier, parse_quantifier(min, max));
      if (is_quantifier) {
        if (!last) return error_at(quantifier_at, "quantifier has nothing before it to repeat");
        if (quantified) return error_at(quantifier_at, "a quantifier cannot follow another quantifier");
        if (peek() == '?') ++pos_;  // lazy: the same language
        if (peek() == '+') return error("possessive quantifiers are not supported");
        Alternative atom(seq.begin() + static_cast<std::ptrdiff_t>(*last), seq.end());
        seq.resize(*last);
        LG_ASSIGN_OR_RETURN(const Element x, writer_.as_element(std::move(atom), "group"));
        LG_ASSIGN_OR_RETURN(Alternative repeated, writer_.repeat(x, min, max, "repeat"));
        seq.insert(seq.end(), repeated.begin(), repeated.end());
        quantified = true;
        continue;
      }
      last = seq.size();
      quantified = false;
      LG_RETURN_IF_ERROR(parse_atom(depth, seq));
    }
    return seq;
  }

  // * + ? {m} {m,} {m,n} {,n}; false (nothing read) when `{` starts no quantifier.
  Result<bool> parse_quantifier(int64_t& min, int64_t& max) {
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      min = c == '+' ? 1 : 0;
      max = c == '?' ? 1 : -1;
      return true;
    }
    if (c != '{') return false;
    size_t p = pos_ + 1;
    const auto number = [&](int64_t& out) {
      const size_t start = p;
      out = 0;
      while (p < text_.size() && text_[p] >= '0' && text_[p] <= '9') {
        out = std::min<int64_t>(out * 10 + (text_[p] - '0'), std::numeric_limits<int32_t>::max());
        ++p;
      }
      return p > start;
    };
    const bool has_min = number(min);
    if (!has_min) min = 0;
    max = min;
    if (p < text_.size() && text_[p] == ',') {
      ++p;
      if (!number(max)) max = -1;
      if (!has_min && max < 0) return false;  // "{,}" is a literal
    } else if (!has_min) {
      return false;
    }
    if (p >= text_.size() || text_[p] != '}') return false;
    const int64_t limit = RuleWriterLimits{}.max_repeat;
    if (min > limit || max > limit) {
      return error("repetition count is over the limit of " + std::to_string(limit));
    }
    if (max >= 0 && max < min) return error("in {m,n}, n is smaller than m");
    pos_ = p + 1;
    return true;
  }

  Status parse_atom(int depth, Alternative& seq) {
    const char c = peek();
    if (c == '(') return parse_group(depth, seq);
    if (c == '[') return parse_class(seq);
    if (c == '.') {
      ++pos_;
      LG_ASSIGN_OR_RETURN(const Element any, writer_.code_points({{'\n', '\n'}}, true, "any-char"));
      seq.push_back(any);
      return Status::ok();
    }
    if (c == '\\') {
      CodePointRanges set;
      bool negated = false;
      LG_ASSIGN_OR_RETURN(const std::optional<char32_t> cp, parse_escape(false, set, negated));
      if (cp) {
        RuleWriter::append_utf8(*cp, seq);
        return Status::ok();
      }
      LG_ASSIGN_OR_RETURN(const Element e, writer_.code_points(set, negated, "class"));
      seq.push_back(e);
      return Status::ok();
    }
    char32_t cp = 0;
    if (!RuleWriter::decode_utf8(text_, pos_, cp)) return error("invalid UTF-8");
    RuleWriter::append_utf8(cp, seq);
    return Status::ok();
  }

  Status parse_group(int depth, Alternative& seq) {
    if (depth >= kMaxRegexNesting) {
      return error("groups nested deeper than " + std::to_string(kMaxRegexNesting) + " levels");
    }
    const size_t open = pos_++;
    if (peek() == '?') {
      if (starts_with("?:")) {
        pos_ += 2;
      } else if (starts_with("?=") || starts_with("?!") || starts_with("?<=") || starts_with("?<!")) {
        return error_at(open, "lookaround assertions are not supported");
      } else if (starts_with("?P=")) {
        return error_at(open, "backreferences are not supported");
      } else if (starts_with("?<") || starts_with("?P<")) {
        pos_ += peek(1) == 'P' ? 3 : 2;
        const size_t name_start = pos_;
        while (!at_end() && (std::isalnum(static_cast<unsigned char>(peek())) != 0 || peek() == '_')) ++pos_;
        if (pos_ == name_start || peek() != '>') return error("expected a group name and '>'");
        ++pos_;
      } else {
        return error_at(open, "inline flags and other (?...) groups are not supported");
      }
    }
    LG_ASSIGN_OR_RETURN(std::vector<Alternative> alts, parse_alternation(depth + 1));
    if (peek() != ')') return error_at(open, "unterminated group (expected ')')");
    ++pos_;
    if (alts.size() == 1) {
      seq.insert(seq.end(), alts[0].begin(), alts[0].end());
      return Status::ok();
    }
    LG_ASSIGN_OR_RETURN(const int32_t group, writer_.add_rule("group"));
    for (Alternative& alt : alts) LG_RETURN_IF_ERROR(writer_.add_alternative(group, std::move(alt)));
    seq.push_back(Element::ref(group));
    return Status::ok();
  }

  Status parse_class(Alternative& seq) {
    const size_t open = pos_++;
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    CodePointRanges ranges;
    bool first = true;
    while (first || peek() != ']') {  // a ']' first is a literal
      if (at_end()) return error_at(open, "unterminated character class (expected ']')");
      first = false;
      const size_t at = pos_;
      LG_ASSIGN_OR_RETURN(const std::optional<char32_t> lo, parse_class_char(ranges));
      if (!lo) {
        if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
          return error_at(at, "a class escape (\\d, \\w, \\s) cannot start a range");
        }
        continue;
      }
      char32_t hi = *lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        const size_t hi_at = pos_;
        LG_ASSIGN_OR_RETURN(const std::optional<char32_t> end, parse_class_char(ranges));
        if (!end) return error_at(hi_at, "a class escape (\\d, \\w, \\s) cannot end a range");
        hi = *end;
        if (hi < *lo) return error_at(at, "character range is out of order");
      }
      ranges.emplace_back(*lo, hi);
    }
    ++pos_;
    LG_ASSIGN_OR_RETURN(const Element e, writer_.code_points(ranges, negated, "class"));
    seq.push_back(e);
    return Status::ok();
  }

  // One character of a class, or nullopt after adding a class escape's ranges to `ranges`.
  Result<std::optional<char32_t>> parse_class_char(CodePointRanges& ranges) {
    if (peek() == '\\') {
      CodePointRanges set;
      bool negated = false;
      LG_ASSIGN_OR_RETURN(const std::optional<char32_t> cp, parse_escape(true, set, negated));
      if (cp) return cp;
      if (negated) set = regex_complement(std::move(set));
      ranges.insert(ranges.end(), set.begin(), set.end());
      return std::optional<char32_t>{};
    }
    char32_t cp = 0;
    if (!RuleWriter::decode_utf8(text_, pos_, cp)) return error("invalid UTF-8");
    return std::optional<char32_t>{cp};
  }

  // An escape at pos_: a code point, or (nullopt) a set of code points in `set`, `negated`.
  Result<std::optional<char32_t>> parse_escape(bool in_class, CodePointRanges& set, bool& negated) {
    const size_t at = pos_;
    if (pos_ + 1 >= text_.size()) return error_at(at, "the pattern ends with a lone '\\'");
    const char kind = text_[pos_ + 1];
    pos_ += 2;
    using Cp = std::optional<char32_t>;
    switch (kind) {
      case 'd': case 'D': set = regex_digit_ranges(); negated = kind == 'D'; return Cp{};
      case 'w': case 'W': set = regex_word_ranges(); negated = kind == 'W'; return Cp{};
      case 's': case 'S': set = regex_space_ranges(); negated = kind == 'S'; return Cp{};
      case 'n': return Cp{U'\n'};
      case 'r': return Cp{U'\r'};
      case 't': return Cp{U'\t'};
      case 'f': return Cp{U'\f'};
      case 'v': return Cp{U'\v'};
      case '0':
        if (peek() >= '0' && peek() <= '9') return error_at(at, "octal escapes are not supported");
        return Cp{U'\0'};
      case 'x': {
        LG_ASSIGN_OR_RETURN(const char32_t v, parse_hex(2, 2));
        return Cp{v};
      }
      case 'u': {
        if (peek() == '{') {
          ++pos_;
          LG_ASSIGN_OR_RETURN(const char32_t v, parse_hex(1, 6));
          if (peek() != '}') return error("expected '}' after the code point");
          ++pos_;
          if (v > kRegexMaxCodePoint) return error_at(at, "code point is beyond U+10FFFF");
          return Cp{v};
        }
        LG_ASSIGN_OR_RETURN(char32_t v, parse_hex(4, 4));
        if (v >= 0xD800 && v <= 0xDBFF && starts_with("\\u")) {  // a UTF-16 pair, as JavaScript reads it
          const size_t low_at = pos_;
          pos_ += 2;
          LG_ASSIGN_OR_RETURN(const char32_t low, parse_hex(4, 4));
          if (low >= 0xDC00 && low <= 0xDFFF) {
            v = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
          } else {
            pos_ = low_at;
          }
        }
        if (v >= 0xD800 && v <= 0xDFFF) return error_at(at, "a lone surrogate code point is not a character");
        return Cp{v};
      }
      case 'b':
        if (in_class) return Cp{U'\b'};
        return error_at(at, "word-boundary assertions (\\b) are not supported");
      case 'B': return error_at(at, "word-boundary assertions (\\B) are not supported");
      case 'A': case 'z': case 'Z': case 'G':
        return error_at(at, "anchors other than a leading '^' and a trailing '$' are not supported");
      case 'k': return error_at(at, "backreferences are not supported");
      case 'p': case 'P': return error_at(at, "Unicode property escapes (\\p{...}) are not supported");
      case 'c': return error_at(at, "control escapes (\\c) are not supported");
      default: break;
    }
    if (kind >= '1' && kind <= '9') return error_at(at, "backreferences are not supported");
    const auto k = static_cast<unsigned char>(kind);
    if (k < 0x80 && std::isalnum(k) == 0) return Cp{static_cast<char32_t>(kind)};  // escaped punctuation
    return error_at(at, "unknown escape");
  }

  Result<char32_t> parse_hex(int min_digits, int max_digits) {
    char32_t value = 0;
    int n = 0;
    for (; n < max_digits; ++n) {
      const char c = peek();
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) break;
      value = value * 16 + static_cast<char32_t>(d);
      ++pos_;
    }
    if (n < min_digits) return error("expected " + std::to_string(min_digits) + " hex digits in the escape");
    return value;
  }

  std::string_view text_;
  size_t pos_ = 0;
  RuleWriter writer_;
};

}  // namespace

Result<Grammar> compile_regex(std::string_view pattern) {
  if (pattern.size() > kMaxRegexBytes) {
    return Status::invalid_argument("regex: the pattern is " + std::to_string(pattern.size()) +
                                    " bytes; the limit is " + std::to_string(kMaxRegexBytes));
  }
  RegexCompiler compiler(pattern);
  return compiler.compile();
}

}  // namespace loragate::grammar
