// kJsonObjectGbnf: a GBNF grammar for one JSON object (RFC 8259), what
// response_format {"type": "json_object"} constrains output to. Whitespace
// between tokens is optional and bounded ({0,20}), so that a model cannot
// spend its whole budget on blanks; numbers are bounded the same way
// (16 integer digits, 1..16 fraction digits, 1..3 exponent digits). The
// object has no whitespace before or after it. A constant; thread-safe.
#pragma once

#include <string_view>

namespace loragate::grammar {

inline constexpr std::string_view kJsonObjectGbnf = R"gbnf(# One JSON object.
root   ::= object
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value ws
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?
ws     ::= [ \t\n]{0,20}
)gbnf";

}  // namespace loragate::grammar
