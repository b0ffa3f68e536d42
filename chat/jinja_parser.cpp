// parse_template(): the entry point of the parser (jinja_parser_impl.h).
#include "chat/jinja_parser.h"

#include "chat/jinja_lexer.h"
#include "chat/jinja_parser_impl.h"

namespace loragate::jinja {

Program parse_template(const std::string& source) {
  return parser_detail::Parser(source, tokenize(source)).run();
}

}  // namespace loragate::jinja
