#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace loragate::jinja {

void runtime_error(const std::string& message) { throw TemplateError(StatusCode::kInvalidArgument, message); }

Value Value::undefined(std::string name) {
  Value v;
  v.s = std::move(name);
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::kBool;
  v.b = x;
  return v;
}
Value Value::integer(std::int64_t x) {
  Value v;
  v.kind = Kind::kInt;
  v.i = x;
  return v;
}
Value Value::real(double x) {
  Value v;
  v.kind = Kind::kFloat;
  v.f = x;
  return v;
}
Value Value::string(std::string x) {
  Value v;
  v.kind = Kind::kString;
  v.s = std::move(x);
  return v;
}
Value Value::make_list(List items, bool is_tuple) {
  Value v;
  v.kind = Kind::kList;
  v.tuple = is_tuple;
  v.list = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::make_dict() {
  Value v;
  v.kind = Kind::kDict;
  v.dict = std::make_shared<Dict>();
  return v;
}
Value Value::make_namespace() {
  Value v = make_dict();
  v.dict->is_namespace = true;
  return v;
}
Value Value::callable(NativeFn f) {
  Value v;
  v.kind = Kind::kCallable;
  v.fn = std::make_shared<NativeFn>(std::move(f));
  return v;
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b;
    case Kind::kInt: return i != 0;
    case Kind::kFloat: return f != 0.0;
    case Kind::kString: return !s.empty();
    case Kind::kList: return !list->empty();
    case Kind::kDict: return dict->is_namespace || !dict->items.empty();
    case Kind::kCallable: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return tuple ? "tuple" : "list";
    case Kind::kDict: return dict->is_namespace ? "Namespace" : "dict";
    case Kind::kCallable: return "function";
  }
  return "?";
}

std::string format_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.2345e+02"
  bool neg = !sci.empty() && sci[0] == '-';
  if (neg) sci.erase(0, 1);
  std::size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  int exp = std::atoi(sci.c_str() + epos + 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out;
  if (exp >= -5 && exp < 16) {  // Python repr: fixed notation in this range
    std::size_t e = static_cast<std::size_t>(exp < 0 ? 0 : exp);
    if (exp < 0) {
      out.assign("0.");
      out.append(static_cast<std::size_t>(-exp - 1), '0');
      out.append(digits);
    } else if (e + 1 >= digits.size()) {
      out.assign(digits);
      out.append(e + 1 - digits.size(), '0');
      out.append(".0");
    } else {
      out.assign(digits, 0, e + 1);
      out.push_back('.');
      out.append(digits, e + 1, std::string::npos);
    }
    if (exp == -5) {  // Python switches to exponent notation below 1e-4
      out.clear();
    }
  }
  if (out.empty()) {
    out.assign(digits, 0, 1);
    if (digits.size() > 1) {
      out.push_back('.');
      out.append(digits, 1, std::string::npos);
    }
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += e;
  }
  if (neg) out.insert(out.begin(), '-');
  return out;
}

static std::string repr_string(const std::string& s) {
  char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(quote)) out += std::string("\\") + quote;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else out += static_cast<char>(c);
  }
  out += quote;
  return out;
}

std::string Value::str() const {
  switch (kind) {
    case Kind::kUndefined: return "";
    case Kind::kString: return s;
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return b ? "True" : "False";
    case Kind::kInt: return std::to_string(i);
    case Kind::kFloat: return format_float(f);
    case Kind::kString: return repr_string(s);
    case Kind::kList: {
      std::string out = tuple ? "(" : "[";
      for (std::size_t k = 0; k < list->size(); ++k) {
        if (k) out += ", ";
        out += (*list)[k].repr();
      }
      if (tuple && list->size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case Kind::kDict: {
      if (dict->is_namespace) return "<Namespace>";
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : dict->items) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(k) + ": " + v.repr();
      }
      return out + "}";
    }
    case Kind::kCallable: return "<function>";
  }
  return "";
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& kv : items)
    if (kv.first == key) return &kv.second;
  return nullptr;
}
Value* Dict::find(std::string_view key) {
  for (auto& kv : items)
    if (kv.first == key) return &kv.second;
  return nullptr;
}
void Dict::set(const std::string& key, Value v) {
  if (Value* old = find(key)) *old = std::move(v);
  else items.emplace_back(key, std::move(v));
}

const Value* CallArgs::get(std::size_t index, std::string_view name) const {
  if (index < pos.size()) return &pos[index];
  for (const auto& kv : kw)
    if (kv.first == name) return &kv.second;
  return nullptr;
}

bool values_equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  bool an = a.is_number() || a.kind == K::kBool, bn = b.is_number() || b.kind == K::kBool;
  if (an && bn) {
    if (a.kind != K::kFloat && b.kind != K::kFloat) return (a.kind == K::kBool ? a.b : a.i) == (b.kind == K::kBool ? b.b : b.i);
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::kUndefined:
    case K::kNone: return true;
    case K::kString: return a.s == b.s;
    case K::kList:
      if (a.list->size() != b.list->size()) return false;
      for (std::size_t k = 0; k < a.list->size(); ++k)
        if (!values_equal((*a.list)[k], (*b.list)[k])) return false;
      return true;
    case K::kDict:
      if (a.dict == b.dict) return true;
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* o = b.dict->find(k);
        if (!o || !values_equal(v, *o)) return false;
      }
      return true;
    case K::kCallable: return a.fn == b.fn;
    default: return false;
  }
}

int values_compare(const Value& a, const Value& b) {
  using K = Value::Kind;
  bool an = a.is_number() || a.kind == K::kBool, bn = b.is_number() || b.kind == K::kBool;
  if (an && bn) {
    double x = a.as_double(), y = b.as_double();
    if (a.kind != K::kFloat && b.kind != K::kFloat) {
      std::int64_t p = a.kind == K::kBool ? a.b : a.i, q = b.kind == K::kBool ? b.b : b.i;
      return p < q ? -1 : (p > q ? 1 : 0);
    }
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) return a.s < b.s ? -1 : (a.s > b.s ? 1 : 0);
  if (a.is_list() && b.is_list()) {
    std::size_t n = std::min(a.list->size(), b.list->size());
    for (std::size_t k = 0; k < n; ++k) {
      int c = values_compare((*a.list)[k], (*b.list)[k]);
      if (c) return c;
    }
    return a.list->size() < b.list->size() ? -1 : (a.list->size() > b.list->size() ? 1 : 0);
  }
  runtime_error(std::string("'<' not supported between instances of '") + a.type_name() + "' and '" + b.type_name() + "'");
}

bool values_contains(const Value& haystack, const Value& needle) {
  if (haystack.is_string()) {
    if (!needle.is_string())
      runtime_error(std::string("'in <string>' requires string as left operand, not ") + needle.type_name());
    return haystack.s.find(needle.s) != std::string::npos;
  }
  if (haystack.is_list()) {
    for (const Value& v : *haystack.list)
      if (values_equal(v, needle)) return true;
    return false;
  }
  if (haystack.is_dict()) return needle.is_string() && haystack.dict->find(needle.s) != nullptr;
  if (haystack.is_undefined()) return false;
  runtime_error(std::string("argument of type '") + haystack.type_name() + "' is not iterable");
}

template <typename J>
static Value from_json_impl(const J& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.template get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      auto u = j.template get<std::uint64_t>();
      if (u <= static_cast<std::uint64_t>(INT64_MAX)) return Value::integer(static_cast<std::int64_t>(u));
      return Value::real(static_cast<double>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::real(j.template get<double>());
    case nlohmann::json::value_t::string: return Value::string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_impl(e));
      return Value::make_list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Value d = Value::make_dict();
      for (auto it = j.begin(); it != j.end(); ++it) d.dict->items.emplace_back(it.key(), from_json_impl(it.value()));
      return d;
    }
    default: return Value::none();
  }
}
Value from_json(const nlohmann::json& j) { return from_json_impl(j); }
Value from_json(const nlohmann::ordered_json& j) { return from_json_impl(j); }

static void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

static void json_value(std::string& out, const Value& v, int indent, bool sort_keys, int depth) {
  if (depth > 512) runtime_error("tojson: value nested too deeply");
  auto newline = [&](int d) {
    out += '\n';
    out.append(static_cast<std::size_t>(indent * d), ' ');
  };
  switch (v.kind) {
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.b ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.i); return;
    case Value::Kind::kFloat:
      if (std::isnan(v.f)) out += "NaN";
      else if (std::isinf(v.f)) out += v.f < 0 ? "-Infinity" : "Infinity";
      else out += format_float(v.f);
      return;
    case Value::Kind::kString: json_string(out, v.s); return;
    case Value::Kind::kList: {
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (std::size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        json_value(out, (*v.list)[k], indent, sort_keys, depth + 1);
      }
      if (indent >= 0) newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::kDict: {
      if (v.dict->items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.dict->items) items.push_back(&kv);
      if (sort_keys)
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      bool first = true;
      for (const auto* kv : items) {
        if (!first) out += indent >= 0 ? "," : ", ";
        first = false;
        if (indent >= 0) newline(depth + 1);
        json_string(out, kv->first);
        out += ": ";
        json_value(out, kv->second, indent, sort_keys, depth + 1);
      }
      if (indent >= 0) newline(depth);
      out += '}';
      return;
    }
    default: runtime_error(std::string("Object of type ") + v.type_name() + " is not JSON serializable");
  }
}

std::string to_json(const Value& v, int indent, bool sort_keys) {
  std::string out;
  json_value(out, v, indent, sort_keys, 0);
  return out;
}

std::vector<std::string> utf8_chars(std::string_view s) {
  std::vector<std::string> out;
  for (std::size_t k = 0; k < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    n = std::min(n, s.size() - k);
    out.emplace_back(s.substr(k, n));
    k += n;
  }
  return out;
}

std::size_t utf8_length(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

}  // namespace loragate::jinja
