// Parser: template text -> Program (syntax tree).
#pragma once

#include <string>

#include "chat/jinja_ast.h"

namespace loragate::jinja {

// Parses a template; throws TemplateError(kCorrupt) with "line L, column C".
Program parse_template(const std::string& source);

}  // namespace loragate::jinja
