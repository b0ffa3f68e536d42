// GBNF, llama.cpp's grammar format (what vLLM's `guided_grammar` takes for
// llama.cpp-compatible backends), compiled to a Grammar over bytes:
//
//   root  ::= "{" ws pair ("," ws pair)* "}"    # the rule named root is the start
//   pair  ::= [a-z]+ ws ":" ws ( "true" | "false" )
//   ws    ::= [ \t\n]{0,20}
//
// Rules `name ::= alternatives` (names [a-zA-Z0-9-]+, referable before their
// definition), `|`, groups `( )` (which may span lines), `*` `+` `?` `{m}`
// `{m,}` `{m,n}`, string literals with escapes \n \r \t \\ \" \[ \] \xHH
// \uHHHH \UHHHHHHHH (each a code point, written as UTF-8), classes [a-z] and
// [^...], `.` (any code point), comments from `#` to the end of the line.
// Inputs are bounded (64 KiB of text, 10,000 rules, groups nested 100 deep,
// counts up to 1000): a request's grammar cannot exhaust the server. Errors
// are invalid_argument naming line:column ("gbnf 3:14: expected ')'").
// Pure function; thread-safe.
#pragma once

#include <string_view>

#include "common/status.h"
#include "grammar/grammar.h"

namespace loragate::grammar {

inline constexpr size_t kMaxGbnfBytes = 64 * 1024;
inline constexpr int kMaxGbnfNesting = 100;

// `max_bytes`: a request's own grammar gets the default; text that loragate
// wrote itself from a (bounded) JSON schema may be longer.
Result<Grammar> parse_gbnf(std::string_view text, size_t max_bytes = kMaxGbnfBytes);

}  // namespace loragate::grammar
