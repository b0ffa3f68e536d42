// RuleWriter: what the text front ends (GBNF, regex) share when they lower
// their syntax into Grammar rules: unique rule names in O(1), caps on the
// number of rules and elements (inputs come from requests), repetitions as
// rules, memoised code-point classes, and UTF-8 helpers. build() also makes
// repetitions of something that can match the empty string legal: x* with a
// nullable x is rewritten to (x minus the empty string)*, which has the same
// language and no left recursion; rules that can match nothing are dropped.
// One per parse; not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/status.h"
#include "grammar/grammar.h"

namespace loragate::grammar {

using CodePointRanges = std::vector<std::pair<char32_t, char32_t>>;

struct RuleWriterLimits {
  size_t max_rules = 10'000;       // rules made, helpers included
  size_t max_elements = 200'000;   // elements over all alternatives (~40 bytes each)
  int64_t max_repeat = 1'000;      // the largest m or n of x{m,n}
};

class RuleWriter {
 public:
  // `what` prefixes errors ("gbnf", "regex").
  explicit RuleWriter(std::string what, RuleWriterLimits limits = {});

  // A new rule named `name`, or `name-N` when that is taken.
  Result<int32_t> add_rule(std::string_view name);
  Status add_alternative(int32_t rule, Alternative alt);
  const std::vector<Rule>& rules() const { return rules_; }

  // One element standing for the sequence `seq`: its only element, or a
  // reference to a new rule `name` matching it.
  Result<Element> as_element(Alternative seq, std::string_view name);
  // The elements matching x repeated min..max times (max < 0: unbounded).
  Result<Alternative> repeat(const Element& x, int64_t min, int64_t max, std::string_view name);
  // One code point in the union of `ranges` (or, negated, outside it): a
  // byte set when that is all ASCII, else a (shared) code-point rule.
  Result<Element> code_points(const CodePointRanges& ranges, bool negated, std::string_view name);

  // The grammar rooted at `root`, after the rewriting described above.
  Result<Grammar> build(int32_t root);

  // UTF-8: appends the bytes of `c` as elements; encodes into a string.
  static void append_utf8(char32_t c, Alternative& out);
  static void append_utf8(char32_t c, std::string& out);
  // Decodes one well-formed UTF-8 code point at `pos` and advances past it;
  // false (pos unchanged) on a malformed, overlong or surrogate sequence.
  static bool decode_utf8(std::string_view text, size_t& pos, char32_t& out);

 private:
  Status too_large(const char* what) const;
  // The rule matching what `rule` matches minus the empty string (made on demand).
  Result<int32_t> non_empty_rule(int32_t rule, std::vector<int32_t>& pending);
  Status rewrite_nullable_repeats();
  Result<int32_t> drop_unproductive(int32_t root);

  std::string what_;
  RuleWriterLimits limits_;
  std::vector<Rule> rules_;
  std::unordered_set<std::string> names_;
  std::unordered_map<std::string, int> next_suffix_;
  size_t elements_ = 0;
  std::vector<int32_t> star_rules_;               // rules x star | "" made by repeat()
  std::map<std::pair<CodePointRanges, bool>, int32_t> classes_;  // code-point rules by content
  std::vector<bool> nullable_;                    // set by build()
  std::unordered_map<int32_t, int32_t> non_empty_;  // rule -> its non-empty version
};

}  // namespace loragate::grammar
