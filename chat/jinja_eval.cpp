// The interpreter's expressions: evaluation of every Expr kind, binary
// operators, calls, attribute and item access, slices. Statements, scopes and
// budgets are in jinja_interpreter.cpp.
#include <algorithm>
#include <cmath>
#include <optional>

#include "chat/jinja_builtins.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_interpreter_detail.h"

namespace loragate::jinja {

using interp_detail::limit_error;
using interp_detail::undefined_message;

namespace {

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
