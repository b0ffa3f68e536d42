#include "chat/jinja_interpreter.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "chat/jinja_builtins.h"

namespace loragate::jinja {
namespace {

// What one for-loop iteration costs in steps: a scope and a loop object of a dozen entries.
constexpr std::uint64_t kStepsPerIteration = 8;

[[noreturn]] void limit_error(const std::string& message) {
  throw TemplateError(StatusCode::kResourceExhausted, message);
}

std::string undefined_message(const Value& v) {
  return v.s.empty() ? std::string("a value is undefined") : "'" + v.s + "' is undefined";
}

std::int64_t to_int(const Value& v) { return v.kind == Value::Kind::kBool ? (v.b ? 1 : 0) : v.i; }
bool intlike(const Value& v) { return v.kind == Value::Kind::kInt || v.kind == Value::Kind::kBool; }
bool numeric(const Value& v) { return v.is_number() || v.kind == Value::Kind::kBool; }

[[noreturn]] void bad_operands(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) runtime_error(undefined_message(a));
  if (b.is_undefined()) runtime_error(undefined_message(b));
  runtime_error("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

Value repeat(const Value& seq, std::int64_t n, Interpreter& in) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    if (static_cast<double>(seq.s.size()) * static_cast<double>(n) > static_cast<double>(in.limits().max_output_bytes))
      limit_error("string repetition exceeds the output limit");
    std::string out;
    for (std::int64_t k = 0; k < n; ++k) out += seq.s;
    return Value::string(std::move(out));
  }
  in.count_iterations(static_cast<std::uint64_t>(n) * seq.list->size());
  List out;
  for (std::int64_t k = 0; k < n; ++k) out.insert(out.end(), seq.list->begin(), seq.list->end());
  return Value::make_list(std::move(out));
}

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

void Interpreter::eval_args(const Expr& e, std::size_t first, CallArgs& out) {
  for (std::size_t k = first; k < e.args.size(); ++k) out.pos.push_back(eval(e.args[k].get()));
  for (const auto& [key, ex] : e.kwargs) out.kw.emplace_back(key, eval(ex.get()));
}

Value Interpreter::eval_call(const Expr& e, const Value* caller) {
  const Expr& callee = *e.args[0];
  Value fn = eval(&callee);
  CallArgs args;
  eval_args(e, 1, args);
  if (caller) args.kw.emplace_back("caller", *caller);
  std::string what = callee.kind == Expr::Kind::kName ? callee.name
                     : callee.kind == Expr::Kind::kGetAttr ? callee.name
                                                             : "expression";
  Value result = call(fn, args, what);
  count_bytes(result);
  return result;
}

Value Interpreter::get_attr(const Value& obj, const std::string& name) {
  if (obj.is_dict()) {
    if (!obj.dict->is_namespace) {
      Value m = get_method(obj, name);
      if (!m.is_undefined()) return m;
    }
    if (const Value* v = obj.dict->find(name)) return *v;
    return Value::undefined(name);
  }
  if (obj.is_string()) count_bytes(obj);  // the bound method holds a copy and scans it
  if (obj.is_string() || obj.is_list()) return get_method(obj, name);
  return Value::undefined(name);
}

Value Interpreter::get_item(const Value& obj, const Value& key) {
  if (obj.is_dict()) {
    if (key.is_string()) {
      if (const Value* v = obj.dict->find(key.s)) return *v;
      return Value::undefined(key.s);
    }
    return Value::undefined();
  }
  if ((obj.is_list() || obj.is_string()) && intlike(key)) {
    std::int64_t idx = to_int(key);
    if (obj.is_list()) {
      std::int64_t n = static_cast<std::int64_t>(obj.list->size());
      if (idx < 0) idx += n;
      if (idx < 0 || idx >= n) return Value::undefined();
      return (*obj.list)[static_cast<std::size_t>(idx)];
    }
    charge_bytes(obj.s.size() * sizeof(std::string));  // split into one string per character to index
    std::vector<std::string> chars = utf8_chars(obj.s);
    std::int64_t n = static_cast<std::int64_t>(chars.size());
    if (idx < 0) idx += n;
    if (idx < 0 || idx >= n) return Value::undefined();
    return Value::string(chars[static_cast<std::size_t>(idx)]);
  }
  if (key.is_string()) return get_attr(obj, key.s);
  return Value::undefined();
}

Value Interpreter::slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  auto opt = [](const Value& v, const char* what) -> std::optional<std::int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!intlike(v)) runtime_error(std::string("slice ") + what + " must be an integer");
    return to_int(v);
  };
  std::int64_t st = opt(step, "step").value_or(1);
  if (st == 0) runtime_error("slice step cannot be zero");
  List items;
  std::vector<std::string> chars;
  std::int64_t n;
  if (obj.is_list()) {
    n = static_cast<std::int64_t>(obj.list->size());
  } else if (obj.is_string()) {
    charge_bytes(obj.s.size() * sizeof(std::string));  // split into one string per character to slice
    chars = utf8_chars(obj.s);
    n = static_cast<std::int64_t>(chars.size());
  } else if (obj.is_undefined()) {
    return Value::undefined();
  } else {
    runtime_error(std::string("'") + obj.type_name() + "' object is not subscriptable");
  }
  auto norm = [&](std::optional<std::int64_t> v, std::int64_t def) {
    if (!v) return def;
    std::int64_t x = *v < 0 ? *v + n : *v;
    if (st > 0) return std::clamp<std::int64_t>(x, 0, n);
    return std::clamp<std::int64_t>(x, -1, n - 1);
  };
  std::int64_t b = norm(opt(start, "start"), st > 0 ? 0 : n - 1);
  std::int64_t e = norm(opt(stop, "stop"), st > 0 ? n : -1);
  std::string s;
  for (std::int64_t k = b; st > 0 ? k < e : k > e; k += st) {
    if (obj.is_list()) items.push_back((*obj.list)[static_cast<std::size_t>(k)]);
    else s += chars[static_cast<std::size_t>(k)];
  }
  Value result = obj.is_list() ? Value::make_list(std::move(items)) : Value::string(std::move(s));
  count_bytes(result);
  return result;
}

Value Interpreter::eval(const Expr* e) {
  if (!e) return hole_ ? *hole_ : Value::undefined();
  count_steps(1);
  switch (e->kind) {
    case Expr::Kind::kLiteral: return e->literal;
    case Expr::Kind::kName: return lookup(e->name);
    case Expr::Kind::kList: {
      List items;
      for (const auto& a : e->args) items.push_back(eval(a.get()));
      return Value::make_list(std::move(items), e->is_tuple);
    }
    case Expr::Kind::kDict: {
      Value d = Value::make_dict();
      for (std::size_t k = 0; k + 1 < e->args.size(); k += 2) {
        Value key = eval(e->args[k].get());
        d.dict->set(key.str(), eval(e->args[k + 1].get()));
      }
      return d;
    }
    case Expr::Kind::kGetAttr: return get_attr(eval(e->args[0].get()), e->name);
    case Expr::Kind::kGetItem: {
      Value obj = eval(e->args[0].get());
      return get_item(obj, eval(e->args[1].get()));
    }
    case Expr::Kind::kSlice: {
      Value obj = eval(e->args[0].get());
      Value a = e->args[1] ? eval(e->args[1].get()) : Value::none();
      Value b = e->args[2] ? eval(e->args[2].get()) : Value::none();
      Value c = e->args[3] ? eval(e->args[3].get()) : Value::none();
      return slice(obj, a, b, c);
    }
    case Expr::Kind::kCall: return eval_call(*e, nullptr);
    case Expr::Kind::kFilter: {
      Value operand = eval(e->args[0].get());
      CallArgs args;
      eval_args(*e, 1, args);
      if (operand.is_string()) count_bytes(operand);  // string filters scan it; list ones are charged their result
      Value result = call_filter(*this, e->name, operand, args);
      count_bytes(result);
      return result;
    }
    case Expr::Kind::kTest: {
      Value operand = eval(e->args[0].get());
      CallArgs args;
      eval_args(*e, 1, args);
      if (operand.is_string()) count_bytes(operand);
      return Value::boolean(call_test(*this, e->name, operand, args) != e->negated);
    }
    case Expr::Kind::kUnary: {
      Value v = eval(e->args[0].get());
      if (e->name == "not") return Value::boolean(!v.truthy());
      if (v.kind == Value::Kind::kFloat) return Value::real(e->name == "-" ? -v.f : v.f);
      if (intlike(v)) return Value::integer(e->name == "-" ? -to_int(v) : to_int(v));
      if (v.is_undefined()) runtime_error(undefined_message(v));
      runtime_error(std::string("bad operand type for unary ") + e->name + ": '" + v.type_name() + "'");
    }
    case Expr::Kind::kBinary: return eval_binary(*e);
    case Expr::Kind::kCompare: {
      Value left = eval(e->args[0].get());
      for (std::size_t k = 0; k < e->ops.size(); ++k) {
        Value right = eval(e->args[k + 1].get());
        const std::string& op = e->ops[k];
        if (op == "in" || op == "notin") count_bytes(right);  // containment scans the haystack
        bool r;
        if (op == "==") r = values_equal(left, right);
        else if (op == "!=") r = !values_equal(left, right);
        else if (op == "in") r = values_contains(right, left);
        else if (op == "notin") r = !values_contains(right, left);
        else {
          if (left.is_undefined() || right.is_undefined()) bad_operands(op, left, right);
          int c = values_compare(left, right);
          r = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
        }
        if (!r) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case Expr::Kind::kCond:
      if (eval(e->args[0].get()).truthy()) return eval(e->args[1].get());
      return e->args[2] ? eval(e->args[2].get()) : Value::undefined();
  }
  return Value::undefined();
}

Value Interpreter::eval_binary(const Expr& e) {
  const std::string& op = e.name;
  Value a = eval(e.args[0].get());
  if (op == "and") return a.truthy() ? eval(e.args[1].get()) : a;
  if (op == "or") return a.truthy() ? a : eval(e.args[1].get());
  Value b = eval(e.args[1].get());
  if (op == "~") return built(Value::string(a.str() + b.str()));
  if (numeric(a) && numeric(b)) {
    bool ints = intlike(a) && intlike(b);
    std::int64_t x = to_int(a), y = to_int(b), r = 0;
    double p = a.as_double(), q = b.as_double();
    if (op == "+") {
      if (!ints) return Value::real(p + q);
      if (__builtin_add_overflow(x, y, &r)) runtime_error("integer overflow");
      return Value::integer(r);
    }
    if (op == "-") {
      if (!ints) return Value::real(p - q);
      if (__builtin_sub_overflow(x, y, &r)) runtime_error("integer overflow");
      return Value::integer(r);
    }
    if (op == "*") {
      if (!ints) return Value::real(p * q);
      if (__builtin_mul_overflow(x, y, &r)) runtime_error("integer overflow");
      return Value::integer(r);
    }
    if (op == "/") {
      if (q == 0) runtime_error("division by zero");
      return Value::real(p / q);
    }
    if (op == "//" || op == "%") {
      if (q == 0) runtime_error(op == "//" ? "integer division or modulo by zero" : "modulo by zero");
      if (ints) {
        if (x == INT64_MIN && y == -1) runtime_error("integer overflow");
        std::int64_t d = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --d;
          m += y;
        }
        return Value::integer(op == "//" ? d : m);
      }
      double m = std::fmod(p, q);
      if (m != 0 && ((m < 0) != (q < 0))) m += q;
      return Value::real(op == "//" ? std::floor(p / q) : m);
    }
    if (op == "**") {
      if (ints && y >= 0) {
        double approx = std::pow(static_cast<double>(x), static_cast<double>(y));
        if (std::fabs(approx) > 9.2e18) runtime_error("integer overflow");
        std::int64_t acc = 1;
        for (std::int64_t k = 0; k < y; ++k) acc *= x;
        return Value::integer(acc);
      }
      return Value::real(std::pow(p, q));
    }
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) return built(Value::string(a.s + b.s));
    if (a.is_list() && b.is_list()) {
      List items = *a.list;
      items.insert(items.end(), b.list->begin(), b.list->end());
      return built(Value::make_list(std::move(items)));
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && intlike(b)) return built(repeat(a, to_int(b), *this));
    if ((b.is_string() || b.is_list()) && intlike(a)) return built(repeat(b, to_int(a), *this));
  }
  bad_operands(op, a, b);
}

}  // namespace loragate::jinja
