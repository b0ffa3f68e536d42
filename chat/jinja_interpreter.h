// Tree-walking interpreter for parsed Jinja templates.
//
// One Interpreter renders one Program once. Scopes follow Jinja: a for-loop
// iteration and a macro call get their own scope (so `set` inside them does
// not leak; use a namespace), `if` does not. Errors are thrown as
// TemplateError; limits on output size, loop iterations, call depth, steps
// and bytes built or scanned turn into kResourceExhausted errors instead of unbounded
// work: any template, however hostile, stops within about a second.
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
  std::size_t max_output_bytes = 1 << 20;         // the rendered text
  std::uint64_t max_loop_iterations = 1'000'000;  // for-loop items and range() lengths, summed
  int max_call_depth = 64;                        // nested macro calls
  // Statements executed plus expressions evaluated (a loop iteration counts
  // 8): bounds the time a render takes where no single loop is long (real
  // chat templates take thousands).
  std::uint64_t max_steps = 2'000'000;
  // Bytes of strings and lists built (concatenation, slicing, repetition,
  // filter and call results) or scanned (string operands of filters, tests
  // and methods, `in` haystacks, string indexing), summed over the render:
  // bounds `{% set ns.a = ns.a + [i] %}` in a loop (quadratic copying) and
  // loops that rescan one huge string or list.
  std::size_t max_bytes = 256u << 20;
};

class Interpreter {
 public:
  explicit Interpreter(Limits limits = {});

  // Renders `program` with `vars` (and the built-in globals) as the top scope.
  std::string render(const Program& program, const Dict& vars);

  // Used by built-in filters and functions.
  Value call(const Value& fn, CallArgs& args, const std::string& what);
  void count_iterations(std::uint64_t n);
  // Charges the bytes of `v` (a string's length, a list's items) to the bytes budget.
  void count_bytes(const Value& v);
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
  void count_steps(std::uint64_t n);
  void charge_bytes(std::size_t n);
  Value built(Value v);  // count_bytes(v), then v

  std::uint64_t iterations_ = 0;
  std::uint64_t steps_ = 0;
  std::size_t bytes_ = 0;
  int call_depth_ = 0;
  const Value* hole_ = nullptr;  // the operand of a filter block / block set
};

}  // namespace loragate::jinja
