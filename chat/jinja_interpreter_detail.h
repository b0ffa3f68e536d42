// Helpers the interpreter's two halves share: jinja_interpreter.cpp (render,
// budgets, scopes, statements) and jinja_eval.cpp (expressions). Internal to chat/.
#pragma once

#include <string>

#include "chat/jinja_value.h"

namespace loragate::jinja::interp_detail {

// Throws the kResourceExhausted TemplateError of a limit that was reached.
[[noreturn]] void limit_error(const std::string& message);

// "'name' is undefined" for an undefined value (that knows its name).
std::string undefined_message(const Value& v);

}  // namespace loragate::jinja::interp_detail
