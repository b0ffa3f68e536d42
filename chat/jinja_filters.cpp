// Built-in filters (`x | name`) and tests (`x is name`).
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "chat/jinja_builtins.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_text.h"

namespace loragate::jinja {
namespace {

const Value* opt(const CallArgs& a, std::size_t i, const char* name) { return a.get(i, name); }
bool flag(const CallArgs& a, std::size_t i, const char* name, bool def) {
  const Value* v = a.get(i, name);
  return v ? v->truthy() : def;
}

// item.attr, with dots for nested attributes and integers for list indexes.
Value attr_of(const Value& item, const std::string& dotted) {
  Value cur = item;
  for (const std::string& part : split_string(dotted, ".")) {
    if (cur.is_dict()) {
      const Value* v = cur.dict->find(part);
      cur = v ? *v : Value::undefined(part);
    } else if (cur.is_list() && !part.empty() && std::isdigit(static_cast<unsigned char>(part[0]))) {
      std::size_t idx = std::stoul(part);
      cur = idx < cur.list->size() ? (*cur.list)[idx] : Value::undefined(part);
    } else {
      return Value::undefined(part);
    }
  }
  return cur;
}

std::int64_t length_of(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kString: return static_cast<std::int64_t>(utf8_length(v.s));
    case Value::Kind::kList: return static_cast<std::int64_t>(v.list->size());
    case Value::Kind::kDict: return static_cast<std::int64_t>(v.dict->items.size());
    case Value::Kind::kUndefined: return 0;
    default: runtime_error(std::string("object of type '") + v.type_name() + "' has no len()");
  }
}

Value to_int_value(const Value& v, const Value& def) {
  switch (v.kind) {
    case Value::Kind::kInt: return v;
    case Value::Kind::kBool: return Value::integer(v.b ? 1 : 0);
    case Value::Kind::kFloat: return Value::integer(static_cast<std::int64_t>(v.f));
    case Value::Kind::kString: {
      std::string t = strip_chars(v.s, nullptr, true, true);
      char* end = nullptr;
      long long i = std::strtoll(t.c_str(), &end, 10);
      if (!t.empty() && *end == '\0') return Value::integer(i);
      double d = std::strtod(t.c_str(), &end);
      if (!t.empty() && *end == '\0' && std::isfinite(d)) return Value::integer(static_cast<std::int64_t>(d));
      return def;
    }
    default: return def;
  }
}

Value to_float_value(const Value& v, const Value& def) {
  if (v.is_number() || v.kind == Value::Kind::kBool) return Value::real(v.as_double());
  if (v.is_string()) {
    std::string t = strip_chars(v.s, nullptr, true, true);
    char* end = nullptr;
    double d = std::strtod(t.c_str(), &end);
    if (!t.empty() && *end == '\0') return Value::real(d);
  }
  return def;
}

// Sort key comparison for sort/dictsort/min/max (case-insensitive strings by default).
int sort_compare(const Value& a, const Value& b, bool case_sensitive) {
  if (!case_sensitive && a.is_string() && b.is_string())
    return values_compare(Value::string(case_map(a.s, CaseMode::kLower)), Value::string(case_map(b.s, CaseMode::kLower)));
  return values_compare(a, b);
}

// select/reject/selectattr/rejectattr.
Value select(Interpreter& in, const Value& operand, CallArgs& a, bool by_attr, bool keep) {
  List items = iterate(operand);
  std::size_t first = 0;
  std::string attr;
  if (by_attr) {
    if (a.pos.empty() || !a.pos[0].is_string()) runtime_error("selectattr/rejectattr need an attribute name");
    attr = a.pos[0].s;
    first = 1;
  }
  std::string test;
  CallArgs test_args;
  if (a.pos.size() > first) {
    if (!a.pos[first].is_string()) runtime_error("test name must be a string");
    test = a.pos[first].s;
    test_args.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(first + 1), a.pos.end());
  }
  List out;
  for (const Value& item : items) {
    Value v = by_attr ? attr_of(item, attr) : item;
    bool r = test.empty() ? v.truthy() : call_test(in, test, v, test_args);
    if (r == keep) out.push_back(item);
  }
  return Value::make_list(std::move(out));
}

Value indent(const std::string& s, const CallArgs& a) {
  const Value* w = a.get(0, "width");
  std::string ind = w ? (w->is_string() ? w->s : std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, w->i)), ' '))
                      : std::string(4, ' ');
  bool first = flag(a, 1, "first", false), blank = flag(a, 2, "blank", false);
  std::vector<std::string> lines = split_lines(s + "\n");
  std::string rv;
  for (std::size_t k = 0; k < lines.size(); ++k) {
    if (k > 0) rv += "\n";
    bool do_indent = k > 0 && (blank || !lines[k].empty());
    rv += (do_indent ? ind : "") + lines[k];
  }
  if (first) rv = ind + rv;
  return Value::string(std::move(rv));
}

}  // namespace

Value call_filter(Interpreter& in, const std::string& name, const Value& v, CallArgs& a) {
  if (name == "length" || name == "count") return Value::integer(length_of(v));
  if (name == "safe" || name == "string") return v.is_string() ? v : Value::string(v.str());
  if (name == "e" || name == "escape") return Value::string(html_escape(v.str()));
  if (name == "tojson") {
    const Value* ind = opt(a, 0, "indent");
    int n = (ind && ind->kind == Value::Kind::kInt) ? static_cast<int>(std::clamp<std::int64_t>(ind->i, 0, 64)) : -1;
    return Value::string(to_json(v, n, flag(a, 99, "sort_keys", false)));
  }
  if (name == "default" || name == "d") {
    const Value* def = opt(a, 0, "default_value");
    bool boolean = flag(a, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !v.truthy())) return def ? *def : Value::string("");
    return v;
  }
  if (name == "int") {
    const Value* def = opt(a, 0, "default");
    return to_int_value(v, def ? *def : Value::integer(0));
  }
  if (name == "float") {
    const Value* def = opt(a, 0, "default");
    return to_float_value(v, def ? *def : Value::real(0.0));
  }
  if (name == "bool") return Value::boolean(v.truthy());
  if (name == "abs") {
    if (v.kind == Value::Kind::kFloat) return Value::real(std::fabs(v.f));
    if (v.kind == Value::Kind::kInt) return Value::integer(v.i < 0 ? -v.i : v.i);
    runtime_error("abs: bad operand type");
  }
  if (name == "round") {
    const Value* p = opt(a, 0, "precision");
    double scale = std::pow(10.0, p ? p->as_double() : 0.0);
    const Value* m = opt(a, 1, "method");
    std::string method = m && m->is_string() ? m->s : "common";
    double x = v.as_double() * scale;
    x = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::round(x);
    return Value::real(x / scale);
  }
  if (v.is_string() || v.is_undefined() || v.is_none()) {
    std::string s = v.str();
    if (name == "upper") return Value::string(case_map(s, CaseMode::kUpper));
    if (name == "lower") return Value::string(case_map(s, CaseMode::kLower));
    if (name == "capitalize") return Value::string(case_map(s, CaseMode::kCapitalize));
    if (name == "title") return Value::string(case_map(s, CaseMode::kJinjaTitle));
    if (name == "trim") {
      const Value* chars = opt(a, 0, "chars");
      return Value::string(strip_chars(s, chars && chars->is_string() ? &chars->s : nullptr, true, true));
    }
    if (name == "indent") return indent(s, a);
    if (name == "replace") {
      const Value* from = opt(a, 0, "old");
      const Value* to = opt(a, 1, "new");
      const Value* count = opt(a, 2, "count");
      if (!from || !to) runtime_error("replace filter needs two arguments");
      return Value::string(replace_all(s, from->str(), to->str(), count && count->kind == Value::Kind::kInt ? count->i : -1));
    }
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::make_list();
    if (!v.is_dict()) runtime_error(std::string("items filter needs a mapping, got ") + v.type_name());
    CallArgs none;
    return (*get_method(v, "items").fn)(in, none);
  }
  if (name == "dictsort") {
    if (!v.is_dict()) runtime_error("dictsort needs a mapping");
    bool cs = flag(a, 0, "case_sensitive", false);
    const Value* by = opt(a, 1, "by");
    bool by_value = by && by->is_string() && by->s == "value";
    bool rev = flag(a, 2, "reverse", false);
    List items;
    for (const auto& [k, x] : v.dict->items) items.push_back(Value::make_list({Value::string(k), x}, true));
    std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
      int c = sort_compare((*p.list)[by_value ? 1 : 0], (*q.list)[by_value ? 1 : 0], cs);
      return rev ? c > 0 : c < 0;
    });
    return Value::make_list(std::move(items));
  }
  if (name == "list") return Value::make_list(iterate(v));
  if (name == "first" || name == "last") {
    List items = iterate(v);
    if (items.empty()) return Value::undefined();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::vector<std::string> cs = utf8_chars(v.s);
      std::string out;
      for (auto it = cs.rbegin(); it != cs.rend(); ++it) out += *it;
      return Value::string(std::move(out));
    }
    List items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::make_list(std::move(items));
  }
  if (name == "join") {
    const Value* sep = opt(a, 0, "d");
    const Value* attr = opt(a, 1, "attribute");
    std::string out;
    List items = iterate(v);
    for (std::size_t k = 0; k < items.size(); ++k) {
      if (k && sep) out += sep->str();
      out += (attr ? attr_of(items[k], attr->str()) : items[k]).str();
    }
    return Value::string(std::move(out));
  }
  if (name == "unique") {
    List out;
    for (const Value& x : iterate(v)) {
      bool seen = false;
      for (const Value& y : out) seen = seen || values_equal(x, y);
      if (!seen) out.push_back(x);
    }
    return Value::make_list(std::move(out));
  }
  if (name == "sort" || name == "min" || name == "max") {
    bool sort = name == "sort";
    bool rev = sort && flag(a, 0, "reverse", false);
    bool cs = flag(a, sort ? 1 : 0, "case_sensitive", false);
    const Value* attr = opt(a, sort ? 2 : 1, "attribute");
    List items = iterate(v);
    auto key = [&](const Value& x) { return attr ? attr_of(x, attr->str()) : x; };
    auto less = [&](const Value& p, const Value& q) {
      int c = sort_compare(key(p), key(q), cs);
      return rev ? c > 0 : c < 0;
    };
    if (sort) {
      std::stable_sort(items.begin(), items.end(), less);
      return Value::make_list(std::move(items));
    }
    if (items.empty()) return Value::undefined();
    return name == "min" ? *std::min_element(items.begin(), items.end(), less)
                         : *std::max_element(items.begin(), items.end(), less);
  }
  if (name == "sum") {
    const Value* attr = opt(a, 0, "attribute");
    const Value* start = opt(a, 1, "start");
    bool is_float = start && start->kind == Value::Kind::kFloat;
    double fs = start ? start->as_double() : 0.0;
    std::int64_t is = start && start->kind == Value::Kind::kInt ? start->i : 0;
    for (const Value& x : iterate(v)) {
      Value y = attr ? attr_of(x, attr->str()) : x;
      if (!y.is_number() && y.kind != Value::Kind::kBool) runtime_error("sum: items must be numbers");
      if (y.kind == Value::Kind::kFloat) is_float = true;
      fs += y.as_double();
      is += y.kind == Value::Kind::kFloat ? 0 : (y.kind == Value::Kind::kBool ? y.b : y.i);
    }
    return is_float ? Value::real(fs) : Value::integer(is);
  }
  if (name == "select" || name == "reject") return select(in, v, a, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") return select(in, v, a, true, name == "selectattr");
  if (name == "map") {
    List out;
    List items = iterate(v);
    if (const Value* attr = opt(a, 99, "attribute")) {
      const Value* def = opt(a, 99, "default");
      for (const Value& x : items) {
        Value y = attr_of(x, attr->str());
        out.push_back(y.is_undefined() && def ? *def : y);
      }
    } else {
      if (a.pos.empty() || !a.pos[0].is_string()) runtime_error("map needs a filter name or attribute=");
      CallArgs rest;
      rest.pos.assign(a.pos.begin() + 1, a.pos.end());
      rest.kw = a.kw;
      for (const Value& x : items) out.push_back(call_filter(in, a.pos[0].s, x, rest));
    }
    return Value::make_list(std::move(out));
  }
  if (name == "attr") {
    const Value* n = opt(a, 0, "name");
    return n ? attr_of(v, n->str()) : Value::undefined();
  }
  if (v.is_undefined()) runtime_error(v.s.empty() ? "filter '" + name + "' applied to an undefined value" : "'" + v.s + "' is undefined");
  runtime_error("unknown filter '" + name + "' for a value of type " + v.type_name());
}

bool call_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& a) {
  using K = Value::Kind;
  auto other = [&]() -> const Value& {
    if (a.pos.empty()) runtime_error("test '" + name + "' needs an argument");
    return a.pos[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind == K::kBool;
  if (name == "true") return v.kind == K::kBool && v.b;
  if (name == "false") return v.kind == K::kBool && !v.b;
  if (name == "integer") return v.kind == K::kInt;
  if (name == "float") return v.kind == K::kFloat;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return false;
  if (name == "odd" || name == "even") {
    if (v.kind != K::kInt) runtime_error("test '" + name + "' needs an integer");
    return (v.i % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const Value& n = other();
    if (v.kind != K::kInt || n.kind != K::kInt || n.i == 0) runtime_error("divisibleby needs non-zero integers");
    return v.i % n.i == 0;
  }
  if (name == "lower") return v.is_string() && v.s == case_map(v.s, CaseMode::kLower);
  if (name == "upper") return v.is_string() && v.s == case_map(v.s, CaseMode::kUpper);
  if (name == "equalto" || name == "eq" || name == "==") return values_equal(v, other());
  if (name == "ne" || name == "!=") return !values_equal(v, other());
  if (name == "sameas") {
    const Value& o = other();
    if (v.kind != o.kind) return false;
    if (v.is_list()) return v.list == o.list;
    if (v.is_dict()) return v.dict == o.dict;
    return values_equal(v, o);
  }
  if (name == "lt" || name == "lessthan" || name == "<") return values_compare(v, other()) < 0;
  if (name == "le" || name == "<=") return values_compare(v, other()) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return values_compare(v, other()) > 0;
  if (name == "ge" || name == ">=") return values_compare(v, other()) >= 0;
  if (name == "in") return values_contains(other(), v);
  (void)in;
  runtime_error("unknown test '" + name + "'");
}

}  // namespace loragate::jinja
