// Lexer for the Jinja subset used by chat templates.
//
// Whitespace control follows Jinja with trim_blocks=True and
// lstrip_blocks=True (as transformers and @huggingface/jinja render chat
// templates): one trailing newline of the template is dropped, the newline
// after a `%}` / `#}` is removed, spaces and tabs between a line start and a
// `{%` / `{#` are removed, `-` strips all whitespace on its side and `+`
// turns the lstrip/trim off for that tag.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace loragate::jinja {

enum class TokenType { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  TokenType type;
  std::string text;  // text, name, decoded string literal, number or operator spelling
  std::size_t pos;   // byte offset in the template source
};

// Splits `source` into tokens; throws TemplateError(kCorrupt) with line and column.
std::vector<Token> tokenize(const std::string& source);

// "line L, column C" of a byte offset (both 1-based, columns in bytes).
std::string describe_position(const std::string& source, std::size_t pos);

}  // namespace loragate::jinja
