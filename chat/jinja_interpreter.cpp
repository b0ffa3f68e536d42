// The Interpreter: render(), the budgets every render is held to (iterations,
// steps, bytes, output), scopes, and the statements (for, set, macros).
// Expressions are evaluated in jinja_eval.cpp.
#include "chat/jinja_interpreter.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "chat/jinja_builtins.h"
#include "chat/jinja_interpreter_detail.h"

namespace loragate::jinja {
namespace interp_detail {

[[noreturn]] void limit_error(const std::string& message) {
  throw TemplateError(StatusCode::kResourceExhausted, message);
}

std::string undefined_message(const Value& v) {
  return v.s.empty() ? std::string("a value is undefined") : "'" + v.s + "' is undefined";
}

}  // namespace interp_detail

using interp_detail::limit_error;
using interp_detail::undefined_message;

namespace {

// What one for-loop iteration costs in steps: a scope and a loop object of a dozen entries.
constexpr std::uint64_t kStepsPerIteration = 8;

}  // namespace

Interpreter::Interpreter(Limits limits) : limits_(limits) {}

std::string Interpreter::render(const Program& program, const Dict& vars) {
  root_ = std::make_shared<Scope>();
  Dict globals;
  install_globals(globals);
  for (auto& [k, v] : globals.items) root_->vars[k] = v;
  for (const auto& [k, v] : vars.items) root_->vars[k] = v;
  scope_ = root_;
  out_.clear();
  exec_body(program.body);
  scope_.reset();
  root_.reset();  // break macro <-> scope references
  return std::move(out_);
}

void Interpreter::count_iterations(std::uint64_t n) {
  iterations_ += n;
  if (iterations_ > limits_.max_loop_iterations)
    limit_error("template exceeded " + std::to_string(limits_.max_loop_iterations) + " loop iterations");
}

void Interpreter::count_steps(std::uint64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps)
    limit_error("template exceeded its budget of " + std::to_string(limits_.max_steps) + " steps");
}

void Interpreter::count_bytes(const Value& v) {
  charge_bytes(v.is_string() ? v.s.size() : v.is_list() ? v.list->size() * sizeof(Value) : 0);
}

void Interpreter::charge_bytes(std::size_t n) {
  bytes_ += n;
  if (bytes_ > limits_.max_bytes)
    limit_error("template exceeded its budget of " + std::to_string(limits_.max_bytes >> 20) +
                " MiB of strings and lists built or scanned");
}

Value Interpreter::built(Value v) {
  count_bytes(v);
  return v;
}

void Interpreter::emit(const std::string& text) {
  if (out_.size() + text.size() > limits_.max_output_bytes)
    limit_error("template output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
  out_ += text;
}

std::string Interpreter::capture(const Body& body) {
  std::string saved = std::move(out_);
  out_.clear();
  exec_body(body);
  std::string captured = std::move(out_);
  out_ = std::move(saved);
  return captured;
}

Value Interpreter::lookup(const std::string& name) const {
  for (const Scope* s = scope_.get(); s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  return Value::undefined(name);
}

void Interpreter::assign(const std::string& name, Value v) { scope_->vars[name] = std::move(v); }

void Interpreter::bind_targets(const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) {
    assign(targets[0], v);
    return;
  }
  List items = iterate(v);
  if (items.size() != targets.size())
    runtime_error("cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(targets.size()) +
                  " names");
  for (std::size_t k = 0; k < targets.size(); ++k) assign(targets[k], items[k]);
}

Interpreter::Flow Interpreter::exec_body(const Body& body) {
  for (const auto& s : body) {
    Flow f = exec(*s);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s) {
  count_steps(1);
  switch (s.kind) {
    case Stmt::Kind::kText: emit(s.text); break;
    case Stmt::Kind::kOutput: emit(eval(s.expr.get()).str()); break;
    case Stmt::Kind::kIf:
      for (const auto& [cond, body] : s.branches)
        if (eval(cond.get()).truthy()) return exec_body(body);
      return exec_body(s.else_body);
    case Stmt::Kind::kFor: exec_for(s); break;
    case Stmt::Kind::kSet: exec_set(s); break;
    case Stmt::Kind::kSetBlock: {
      Value v = Value::string(capture(s.body));
      if (s.filter) {
        const Value* saved = hole_;
        hole_ = &v;
        Value filtered = eval(s.filter.get());
        hole_ = saved;
        v = std::move(filtered);
      }
      assign(s.targets[0], std::move(v));
      break;
    }
    case Stmt::Kind::kMacro: define_macro(s); break;
    case Stmt::Kind::kCallBlock: {
      std::weak_ptr<Scope> here = scope_;
      const Stmt* stmt = &s;
      Value caller = Value::callable([this, stmt, here](Interpreter&, CallArgs& args) {
        return invoke_macro(*stmt, here, args);
      });
      emit(eval_call(*s.expr, &caller).str());
      break;
    }
    case Stmt::Kind::kFilterBlock: {
      Value body = Value::string(capture(s.body));
      const Value* saved = hole_;
      hole_ = &body;
      Value filtered = eval(s.filter.get());
      hole_ = saved;
      emit(filtered.str());
      break;
    }
    case Stmt::Kind::kBreak: return Flow::kBreak;
    case Stmt::Kind::kContinue: return Flow::kContinue;
    case Stmt::Kind::kDo: (void)eval(s.expr.get()); break;
    case Stmt::Kind::kScope: return exec_body(s.body);
  }
  return Flow::kNormal;
}

void Interpreter::exec_for(const Stmt& s) {
  Value iterable = eval(s.expr.get());
  if (iterable.is_none()) runtime_error("'NoneType' object is not iterable");
  List items = iterate(iterable);
  count_iterations(items.size());
  auto outer = scope_;
  if (s.cond) {  // the inline `if` filters before loop.length is known
    List kept;
    for (const Value& item : items) {
      scope_ = std::make_shared<Scope>(Scope{{}, outer});
      bind_targets(s.targets, item);
      if (eval(s.cond.get()).truthy()) kept.push_back(item);
    }
    scope_ = outer;
    items = std::move(kept);
  }
  const std::int64_t n = static_cast<std::int64_t>(items.size());
  for (std::int64_t k = 0; k < n; ++k) {
    count_steps(kStepsPerIteration);
    scope_ = std::make_shared<Scope>(Scope{{}, outer});
    Value loop = Value::make_dict();
    Dict& d = *loop.dict;
    d.set("index0", Value::integer(k));
    d.set("index", Value::integer(k + 1));
    d.set("revindex0", Value::integer(n - k - 1));
    d.set("revindex", Value::integer(n - k));
    d.set("first", Value::boolean(k == 0));
    d.set("last", Value::boolean(k == n - 1));
    d.set("length", Value::integer(n));
    d.set("depth", Value::integer(1));
    d.set("depth0", Value::integer(0));
    d.set("previtem", k > 0 ? items[static_cast<std::size_t>(k - 1)] : Value::undefined("loop.previtem"));
    d.set("nextitem", k + 1 < n ? items[static_cast<std::size_t>(k + 1)] : Value::undefined("loop.nextitem"));
    d.set("cycle", Value::callable([k](Interpreter&, CallArgs& args) {
            if (args.pos.empty()) runtime_error("loop.cycle() needs at least one value");
            return args.pos[static_cast<std::size_t>(k) % args.pos.size()];
          }));
    assign("loop", loop);
    bind_targets(s.targets, items[static_cast<std::size_t>(k)]);
    Flow f = exec_body(s.body);
    scope_ = outer;
    if (f == Flow::kBreak) break;
  }
  scope_ = outer;
  if (n == 0) exec_body(s.else_body);
}

void Interpreter::exec_set(const Stmt& s) {
  Value v = eval(s.expr.get());
  if (!s.attr.empty()) {
    Value target = lookup(s.targets[0]);
    if (!target.is_dict() || !target.dict->is_namespace)
      runtime_error("cannot assign attribute '" + s.attr + "' on non-namespace object '" + s.targets[0] + "'");
    target.dict->set(s.attr, std::move(v));
    return;
  }
  bind_targets(s.targets, v);
}

void Interpreter::define_macro(const Stmt& s) {
  std::weak_ptr<Scope> here = scope_;
  const Stmt* stmt = &s;
  assign(s.name, Value::callable([this, stmt, here](Interpreter&, CallArgs& args) {
           return invoke_macro(*stmt, here, args);
         }));
}

Value Interpreter::invoke_macro(const Stmt& macro, const std::weak_ptr<Scope>& defined_in, CallArgs& args) {
  if (++call_depth_ > limits_.max_call_depth) {
    call_depth_ = 0;
    limit_error("macro calls nested deeper than " + std::to_string(limits_.max_call_depth));
  }
  auto parent = defined_in.lock();
  auto saved = scope_;
  auto frame = std::make_shared<Scope>(Scope{{}, parent ? parent : root_});
  scope_ = frame;
  List varargs;
  for (std::size_t k = 0; k < args.pos.size(); ++k) {
    if (k < macro.params.size()) assign(macro.params[k].first, args.pos[k]);
    else varargs.push_back(args.pos[k]);
  }
  Value kwargs = Value::make_dict();
  for (auto& [key, v] : args.kw) {
    bool is_param = false;
    for (const auto& p : macro.params) is_param = is_param || p.first == key;
    if (is_param || key == "caller") assign(key, v);
    else kwargs.dict->set(key, v);
  }
  for (std::size_t k = args.pos.size(); k < macro.params.size(); ++k) {
    const auto& [pname, def] = macro.params[k];
    if (frame->vars.count(pname)) continue;
    assign(pname, def ? eval(def.get()) : Value::undefined(pname));
  }
  assign("varargs", Value::make_list(std::move(varargs)));
  assign("kwargs", kwargs);
  std::string text = capture(macro.body);
  scope_ = saved;
  --call_depth_;
  return Value::string(std::move(text));
}

Value Interpreter::call(const Value& fn, CallArgs& args, const std::string& what) {
  if (!fn.is_callable()) {
    if (fn.is_undefined()) runtime_error(fn.s.empty() ? "'" + what + "' is undefined" : undefined_message(fn));
    runtime_error("'" + what + "' (" + fn.type_name() + ") is not callable");
  }
  return (*fn.fn)(*this, args);
}

}  // namespace loragate::jinja
