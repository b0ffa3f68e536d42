// Tree-walking interpreter for parsed Jinja templates.
//
// One Interpreter renders one Program once. Scopes follow Jinja: a for-loop
// iteration and a macro call get their own scope (so `set` inside them does
// not leak; use a namespace), `if` does not. Errors are thrown as
// TemplateError; limits on output size, loop iterations and call depth turn
// into kResourceExhausted errors instead of unbounded work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace loragate::jinja {

struct Limits {
  std::size_t max_output_bytes = 1 << 20;
  std::uint64_t max_loop_iterations = 1'000'000;
  int max_call_depth = 64;
};

class Interpreter {
 public:
  explicit Interpreter(Limits limits = {});

  // Renders `program` with `vars` (and the built-in globals) as the top scope.
  std::string render(const Program& program, const Dict& vars);

  // Used by built-in filters and functions.
  Value call(const Value& fn, CallArgs& args, const std::string& what);
  void count_iterations(std::uint64_t n);
  const Limits& limits() const { return limits_; }

 private:
  struct Scope {
    std::unordered_map<std::string, Value> vars;
    std::shared_ptr<Scope> parent;
  };
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec_body(const Body& body);
  Flow exec(const Stmt& s);
  void exec_for(const Stmt& s);
  void exec_set(const Stmt& s);
  void define_macro(const Stmt& s);
  Value invoke_macro(const Stmt& macro, const std::weak_ptr<Scope>& defined_in, CallArgs& args);
  std::string capture(const Body& body);
  void emit(const std::string& text);

  Value eval(const Expr* e);
  Value eval_binary(const Expr& e);
  Value eval_call(const Expr& e, const Value* caller);
  void eval_args(const Expr& e, std::size_t first, CallArgs& out);
  Value get_attr(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);
  void bind_targets(const std::vector<std::string>& targets, const Value& v);

  Limits limits_;
  std::string out_;
  std::shared_ptr<Scope> scope_;
  std::shared_ptr<Scope> root_;
  std::uint64_t iterations_ = 0;
  int call_depth_ = 0;
  const Value* hole_ = nullptr;  // the operand of a filter block / block set
};

}  // namespace loragate::jinja
