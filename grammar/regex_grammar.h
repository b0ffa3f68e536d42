// compile_regex: the regular expressions of JSON Schema's `pattern` and
// vLLM's `guided_regex`, compiled to a Grammar over bytes. The whole output
// must match (a leading ^ and trailing $ are accepted and change nothing).
//
// Supported: literals (UTF-8), `.` (any code point but \n), escapes \d \w \s
// \D \W \S (ECMA-262 sets: \d and \w ASCII, \s with Unicode spaces), \n \r
// \t \f \v \0 \xHH \uHHHH \u{H...} and escaped punctuation; classes [...]
// with ranges, negation and escapes; groups ( ), (?: ), (?<name> ) and
// (?P<name> ) (all plain groups); alternation |; quantifiers * + ? {m}
// {m,} {m,n} {,n}, lazy forms (a*?) treated as greedy, since only the
// language matters. A `{` that does not start a quantifier is a literal.
// Refused with invalid_argument naming the construct: backreferences,
// lookaround, word boundaries, anchors other than a leading ^ / trailing $,
// possessive quantifiers, inline flags, \p{...}. Bounded (4 KiB pattern,
// counts up to 1000, groups nested 100 deep, the RuleWriter's rule caps).
// Pure function; thread-safe.
#pragma once

#include <string_view>

#include "common/status.h"
#include "grammar/grammar.h"

namespace loragate::grammar {

inline constexpr size_t kMaxRegexBytes = 4 * 1024;
inline constexpr int kMaxRegexNesting = 100;

Result<Grammar> compile_regex(std::string_view pattern);

}  // namespace loragate::grammar
