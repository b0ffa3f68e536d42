#include "grammar/gbnf.h"

#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/rule_writer.h"

namespace loragate::grammar {
namespace {

bool gbnf_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

// A recursive-descent parser that writes rules as it reads; recursion is
// bounded by the nesting limit.
class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text), writer_("gbnf") {}

  Result<Grammar> parse() {
    skip_space(true);
    while (pos_ < text_.size()) LG_RETURN_IF_ERROR(parse_rule());
    // Undefined names: the first one referenced is reported.
    const UserRule* missing = nullptr;
    for (const auto& [name, rule] : user_rules_) {
      if (!rule.defined && (missing == nullptr || rule.first_use < missing->first_use)) missing = &rule;
    }
    if (missing != nullptr) return error_at(missing->first_use, "undefined rule '" + shown(missing->name) + "'");
    const auto root = user_rules_.find("root");
    if (root == user_rules_.end()) return Status::invalid_argument("gbnf: no rule named 'root' (the start rule)");
    return writer_.build(root->second.index);
  }

 private:
  struct UserRule {
    std::string name;
    int32_t index = -1;
    bool defined = false;
    size_t first_use = 0;
  };

  // Rule names are echoed in errors, cut to a readable length.
  static std::string shown(std::string_view name) {
    return name.size() <= 64 ? std::string(name) : std::string(name.substr(0, 64)) + "...";
  }

  // "line:column" of a byte offset, both from 1.
  std::string position_text(size_t at) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return std::to_string(line) + ":" + std::to_string(column);
  }
  Status error_at(size_t at, const std::string& what) const {
    return Status::invalid_argument("gbnf " + position_text(at) + ": " + what);
  }
  Status error(const std::string& what) const { return error_at(pos_, what); }

  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  bool at_end() const { return pos_ >= text_.size(); }

  // Spaces, tabs and comments; line breaks too where `newlines` (between
  // rules, after `::=` and `|`, and inside groups).
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n' && peek() != '\r') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view read_word() {
    const size_t start = pos_;
    while (!at_end() && gbnf_word_char(peek())) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  Result<int32_t> user_rule(std::string_view name, size_t at) {
    auto it = user_rules_.find(std::string(name));
    if (it == user_rules_.end()) {
      LG_ASSIGN_OR_RETURN(const int32_t index, writer_.add_rule(name));
      it = user_rules_.emplace(std::string(name), UserRule{std::string(name), index, false, at}).first;
    }
    return it->second.index;
  }

  Status parse_rule() {
    const size_t name_at = pos_;
    const std::string_view name = read_word();
    if (name.empty()) return error("expected a rule name");
    skip_space(false);
    if (text_.substr(pos_, 3) != "::=") return error("expected '::=' after the rule name");
    pos_ += 3;
    skip_space(true);
    LG_ASSIGN_OR_RETURN(const int32_t index, user_rule(name, name_at));
    UserRule& rule = user_rules_.at(std::string(name));
    if (rule.defined) return error_at(name_at, "rule '" + shown(name) + "' is defined twice");
    rule.defined = true;
    rule_name_ = std::string(name);
    LG_ASSIGN_OR_RETURN(std::vector<Alternative> alts, parse_alternatives(0));
    for (Alternative& alt : alts) LG_RETURN_IF_ERROR(writer_.add_alternative(index, std::move(alt)));
    if (peek() == '\r') ++pos_;
    if (peek() == '\n') {
      ++pos_;
    } else if (!at_end()) {
      return error("expected '|', an element, or the end of the line");
    }
    skip_space(true);
    return Status::ok();
  }

  Result<std::vector<Alternative>> parse_alternatives(int depth) {
    std::vector<Alternative> alts;
    LG_ASSIGN_OR_RETURN(Alternative first, parse_sequence(depth));
    alts.push_back(std::move(first));
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      LG_ASSIGN_OR_RETURN(Alternative next, parse_sequence(depth));
      alts.push_back(std::move(next));
    }
    return alts;
  }

  Result<Alternative> parse_sequence(int depth) {
    Alternative seq;
    std::optional<size_t> last;  // where the last item starts in seq: what a quantifier repeats
    while (!at_end()) {
      const char c = peek();
      if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!last) return error(std::string("'") + c + "' has nothing before it to repeat");
        int64_t min = 0, max = -1;
        if (c == '{') {
          LG_RETURN_IF_ERROR(parse_braces(depth > 0, min, max));
        } else {
          // A run of * + ? is one repetition: (x?)+ = x*, (x+)? = x*, (x*)* = x*, ...
          // exact for these counts, and it keeps the matcher's stacks shallow.
          min = 1;
          max = 1;
          while (peek() == '*' || peek() == '+' || peek() == '?') {
            const char q = text_[pos_++];
            min = q == '+' ? min : 0;
            max = q == '?' ? max : -1;
          }
        }
        Alternative item(seq.begin() + static_cast<std::ptrdiff_t>(*last), seq.end());
        seq.resize(*last);
        LG_ASSIGN_OR_RETURN(const Element x, writer_.as_element(std::move(item), rule_name_));
        LG_ASSIGN_OR_RETURN(Alternative repeated, writer_.repeat(x, min, max, rule_name_));
        seq.insert(seq.end(), repeated.begin(), repeated.end());
      } else if (c == '"' || c == '[' || c == '.' || c == '(' || gbnf_word_char(c)) {
        last = seq.size();
        LG_RETURN_IF_ERROR(parse_item(depth, seq));
      } else {
        break;
      }
      skip_space(depth > 0);
    }
    return seq;
  }

  // One literal, class, `.`, rule reference or group, appended to `seq`.
  Status parse_item(int depth, Alternative& seq) {
    const char c = peek();
    if (c == '"') {
      const size_t open = pos_++;
      while (peek() != '"') {
        if (at_end()) return error_at(open, "unterminated string literal (expected '\"')");
        const size_t at = pos_;
        LG_ASSIGN_OR_RETURN(const char32_t cp, parse_char());
        if (cp >= 0xD800 && cp <= 0xDFFF) return error_at(at, "a surrogate code point cannot be written as UTF-8");
        RuleWriter::append_utf8(cp, seq);
      }
      ++pos_;
      return Status::ok();
    }
    if (c == '[') return parse_class(seq);
    if (c == '.') {
      ++pos_;
      LG_ASSIGN_OR_RETURN(const Element any, writer_.code_points({{0, 0x10FFFF}}, false, "any-char"));
      seq.push_back(any);
      return Status::ok();
    }
    if (c == '(') {
      if (depth >= kMaxGbnfNesting) {
        return error("groups nested deeper than " + std::to_string(kMaxGbnfNesting) + " levels");
      }
      const size_t open = pos_++;
      skip_space(true);
      LG_ASSIGN_OR_RETURN(std::vector<Alternative> alts, parse_alternatives(depth + 1));
      if (peek() != ')') return error("expected ')' to close the '(' at " + position_text(open));
      ++pos_;
      if (alts.size() == 1) {  // a plain sequence needs no rule of its own
        seq.insert(seq.end(), alts[0].begin(), alts[0].end());
        return Status::ok();
      }
      LG_ASSIGN_OR_RETURN(const int32_t group, writer_.add_rule(rule_name_));
      for (Alternative& alt : alts) LG_RETURN_IF_ERROR(writer_.add_alternative(group, std::move(alt)));
      seq.push_back(Element::ref(group));
      return Status::ok();
    }
    const size_t at = pos_;
    const std::string_view name = read_word();
    LG_ASSIGN_OR_RETURN(const int32_t ref, user_rule(name, at));
    seq.push_back(Element::ref(ref));
    return Status::ok();
  }

  Status parse_class(Alternative& seq) {
    const size_t open = pos_++;
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    CodePointRanges ranges;
    while (peek() != ']') {
      if (at_end()) return error_at(open, "unterminated character class (expected ']')");
      const size_t at = pos_;
      LG_ASSIGN_OR_RETURN(const char32_t lo, parse_char());
      char32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        LG_ASSIGN_OR_RETURN(hi, parse_char());
        if (hi < lo) return error_at(at, "character range is out of order");
      }
      ranges.emplace_back(lo, hi);
    }
    ++pos_;
    LG_ASSIGN_OR_RETURN(const Element set, writer_.code_points(ranges, negated, rule_name_ + "-char"));
    seq.push_back(set);
    return Status::ok();
  }

  // One character of a literal or class: an escape or a UTF-8 code point.
  Result<char32_t> parse_char() {
    const size_t at = pos_;
    if (peek() != '\\') {
      char32_t c = 0;
      if (!RuleWriter::decode_utf8(text_, pos_, c)) return error("invalid UTF-8");
      return c;
    }
    const char kind = peek(1);
    pos_ += 2;
    switch (kind) {
      case 'n': return char32_t{'\n'};
      case 'r': return char32_t{'\r'};
      case 't': return char32_t{'\t'};
      case '\\': case '"': case '[': case ']': case '-': case '^': return static_cast<char32_t>(kind);
      case 'x': return parse_hex(2, at);
      case 'u': return parse_hex(4, at);
      case 'U': return parse_hex(8, at);
      default: return error_at(at, "unknown escape (expected one of \\n \\r \\t \\\\ \\\" \\[ \\] \\x \\u \\U)");
    }
  }

  Result<char32_t> parse_hex(int digits, size_t escape_at) {
    char32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) return error("expected " + std::to_string(digits) + " hex digits in the escape");
      value = value * 16 + static_cast<char32_t>(d);
      ++pos_;
    }
    if (value > 0x10FFFF) return error_at(escape_at, "code point is beyond U+10FFFF");
    return value;
  }

  // {m}, {m,}, {m,n}.
  Status parse_braces(bool nested, int64_t& min, int64_t& max) {
    ++pos_;
    skip_space(nested);
    LG_ASSIGN_OR_RETURN(min, parse_count());
    skip_space(nested);
    max = min;
    if (peek() == ',') {
      ++pos_;
      skip_space(nested);
      max = -1;
      if (peek() >= '0' && peek() <= '9') {
        const size_t at = pos_;
        LG_ASSIGN_OR_RETURN(max, parse_count());
        if (max < min) return error_at(at, "in {m,n}, n is smaller than m");
      }
      skip_space(nested);
    }
    if (peek() != '}') return error("expected '}'");
    ++pos_;
    return Status::ok();
  }

  Result<int64_t> parse_count() {
    if (!(peek() >= '0' && peek() <= '9')) return error("expected a number");
    const size_t at = pos_;
    int64_t n = 0;
    while (peek() >= '0' && peek() <= '9') {
      n = std::min<int64_t>(n * 10 + (peek() - '0'), std::numeric_limits<int32_t>::max());
      ++pos_;
    }
    if (n > RuleWriterLimits{}.max_repeat) {
      return error_at(at, "repetition count is over the limit of " + std::to_string(RuleWriterLimits{}.max_repeat));
    }
    return n;
  }

  std::string_view text_;
  size_t pos_ = 0;
  RuleWriter writer_;
  std::unordered_map<std::string, UserRule> user_rules_;
  std::string rule_name_;  // the rule being defined: helper rules are named after it
};

}  // namespace

Result<Grammar> parse_gbnf(std::string_view text, size_t max_bytes) {
  if (text.size() > max_bytes) {
    return Status::invalid_argument("gbnf: the grammar is " + std::to_string(text.size()) + " bytes; the limit is " +
                                    std::to_string(max_bytes));
  }
  GbnfParser parser(text);
  return parser.parse();
}

}  // namespace loragate::grammar
