// Built-in filters, tests, methods (str/list/dict) and global functions.
#pragma once

#include <string>

#include "chat/jinja_value.h"

namespace loragate::jinja {

class Interpreter;

// `operand | name(args)`; throws for an unknown filter or bad operand type.
Value call_filter(Interpreter& in, const std::string& name, const Value& operand, CallArgs& args);
// `operand is name(args)`.
bool call_test(Interpreter& in, const std::string& name, const Value& operand, CallArgs& args);
// A bound method of a str, list or dict (e.g. "abc".upper); undefined when there is none.
Value get_method(const Value& obj, const std::string& name);
// Adds range, namespace, raise_exception, strftime_now, dict, cycler, joiner to `globals`.
void install_globals(Dict& globals);
// Python iteration: list items, dict keys, string characters; undefined gives nothing.
List iterate(const Value& v);

}  // namespace loragate::jinja
