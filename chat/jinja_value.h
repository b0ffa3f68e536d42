// The value type of the Jinja-subset evaluator used for chat templates.
//
// Values follow Python/Jinja semantics: lists and dicts are shared by
// reference (a namespace is a dict that `set ns.attr = ...` may change),
// dicts keep insertion order, and an undefined value renders as "" and is
// falsy. Errors inside the evaluator are thrown as TemplateError and turned
// into a Status at the chat_template boundary.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace loragate::jinja {

// Thrown inside the lexer, parser and interpreter; never leaves lg_chat.
class TemplateError : public std::runtime_error {
 public:
  TemplateError(StatusCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  StatusCode code() const { return code_; }

 private:
  StatusCode code_;
};

// A runtime error (what raise_exception() and type errors give): invalid_argument.
[[noreturn]] void runtime_error(const std::string& message);

class Interpreter;
struct Value;
struct Dict;
struct CallArgs;
using List = std::vector<Value>;
using NativeFn = std::function<Value(Interpreter&, CallArgs&)>;

struct Value {
  enum class Kind : std::uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Kind kind = Kind::kUndefined;
  bool b = false;
  bool tuple = false;  // a list that prints as a Python tuple
  std::int64_t i = 0;
  double f = 0.0;
  std::string s;  // string value; for undefined, the name that was missing
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<NativeFn> fn;

  static Value undefined(std::string name = {});
  static Value none();
  static Value boolean(bool v);
  static Value integer(std::int64_t v);
  static Value real(double v);
  static Value string(std::string v);
  static Value make_list(List items = {}, bool is_tuple = false);
  static Value make_dict();
  static Value make_namespace();
  static Value callable(NativeFn fn);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_list() const { return kind == Kind::kList; }
  bool is_dict() const { return kind == Kind::kDict; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat; }
  bool is_callable() const { return kind == Kind::kCallable; }
  double as_double() const { return kind == Kind::kFloat ? f : static_cast<double>(kind == Kind::kBool ? b : i); }

  bool truthy() const;
  std::string str() const;   // Python str(): what {{ x }} prints
  std::string repr() const;  // Python repr(): how x prints inside a list or dict
  const char* type_name() const;
};

struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;

  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(const std::string& key, Value v);
};

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;

  // Positional argument `index`, else keyword `name`, else nullptr.
  const Value* get(std::size_t index, std::string_view name) const;
};

// Python == between two values (1 == 1.0, lists and dicts deeply).
bool values_equal(const Value& a, const Value& b);
// Python ordering (<0, 0, >0) for numbers, strings and lists; throws on other types.
int values_compare(const Value& a, const Value& b);
// `needle in haystack` for strings, lists and dicts.
bool values_contains(const Value& haystack, const Value& needle);

// Python's repr of a float ("1.0", "0.1", "1e+16").
std::string format_float(double v);

// JSON in and out. to_json follows json.dumps(ensure_ascii=False) as HF's
// tojson does: ", " and ": " separators, or newlines and `indent` spaces.
Value from_json(const nlohmann::json& j);
Value from_json(const nlohmann::ordered_json& j);
std::string to_json(const Value& v, int indent = -1, bool sort_keys = false);

// UTF-8 helpers (code points, as Python strings count).
std::vector<std::string> utf8_chars(std::string_view s);
std::size_t utf8_length(std::string_view s);

}  // namespace loragate::jinja
