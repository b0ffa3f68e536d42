// Grammar: the one internal form every structured-output request compiles to
// (GBNF/EBNF, regex, a choice list, JSON and JSON Schema): a context-free
// grammar over bytes. A rule is a list of alternatives; an alternative is a
// sequence of elements, each a set of bytes or a reference to a rule.
// Repetition and optional parts are written as rules by the front ends
// (x* is  r ::= x r | ""), and a character class outside ASCII as the
// alternatives of its UTF-8 byte sequences, so the matcher sees nothing but
// bytes. Immutable once built; safe to share between threads.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace loragate::grammar {

using ByteSet = std::bitset<256>;

struct Element {
  enum class Kind : uint8_t { kBytes, kRule };
  Kind kind = Kind::kBytes;
  ByteSet bytes;      // kBytes: the bytes that match
  int32_t rule = -1;  // kRule: index into Grammar::rules

  static Element byte_set(const ByteSet& set) { return {Kind::kBytes, set, -1}; }
  static Element byte(uint8_t b) {
    ByteSet s;
    s.set(b);
    return byte_set(s);
  }
  static Element ref(int32_t r) { return {Kind::kRule, {}, r}; }
};

using Alternative = std::vector<Element>;  // empty = matches the empty string

struct Rule {
  std::string name;  // for errors and dumps
  std::vector<Alternative> alternatives;
};

class Grammar {
 public:
  // Checks every reference, that the root exists, and that no rule can reach
  // itself without consuming a byte first (left recursion, which a top-down
  // matcher cannot run); the error names the rules.
  static Result<Grammar> make(std::vector<Rule> rules, int32_t root);

  const std::vector<Rule>& rules() const { return rules_; }
  int32_t root() const { return root_; }
  // A stable text form (GBNF-like), used as the key of compiled-grammar caches and in tests.
  std::string dump() const;

 private:
  std::vector<Rule> rules_;
  int32_t root_ = 0;
};

// Which rules match the empty string.
std::vector<bool> nullable_rules(const std::vector<Rule>& rules);

// Builds rules with readable helpers; front ends share it.
class GrammarBuilder {
 public:
  // A new rule with this name (made unique with a suffix if taken); returns its index.
  int32_t add_rule(std::string name);
  void add_alternative(int32_t rule, Alternative alt);
  // Literal bytes as elements.
  static Alternative literal(std::string_view bytes);
  // A rule matching one UTF-8 encoded code point in the union of `ranges` (inclusive;
  // surrogates never match), or, `negated`, one outside it.
  int32_t code_points(const std::vector<std::pair<char32_t, char32_t>>& ranges, bool negated,
                           const std::string& name);
  std::vector<Rule>& rules() { return rules_; }
  Result<Grammar> build(int32_t root) { return Grammar::make(std::move(rules_), root); }

 private:
  std::vector<Rule> rules_;
};

}  // namespace loragate::grammar
