// Methods of str, list and dict values, and the template globals.
#include <cctype>
#include <ctime>
#include <utf8proc.h>

#include "chat/jinja_builtins.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_text.h"

namespace loragate::jinja {
namespace {

const Value& arg(const CallArgs& a, std::size_t i, const char* name, const char* fn) {
  const Value* v = a.get(i, name);
  if (!v) runtime_error(std::string(fn) + "() missing argument '" + name + "'");
  return *v;
}
const std::string& str_arg(const CallArgs& a, std::size_t i, const char* name, const char* fn) {
  const Value& v = arg(a, i, name, fn);
  if (!v.is_string()) runtime_error(std::string(fn) + "() argument '" + name + "' must be str, not " + v.type_name());
  return v.s;
}
std::int64_t int_arg(const CallArgs& a, std::size_t i, const char* name, std::int64_t def) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none()) return def;
  if (v->kind == Value::Kind::kBool) return v->b;
  if (v->kind != Value::Kind::kInt) runtime_error(std::string("argument '") + name + "' must be an integer");
  return v->i;
}

// str.startswith / endswith accept a string or a tuple of strings.
bool affix_match(const std::string& s, const Value& pat, bool start) {
  auto one = [&](const Value& p) {
    if (!p.is_string()) runtime_error("startswith/endswith argument must be str or a tuple of str");
    if (p.s.size() > s.size()) return false;
    return start ? s.compare(0, p.s.size(), p.s) == 0 : s.compare(s.size() - p.s.size(), p.s.size(), p.s) == 0;
  };
  if (pat.is_list()) {
    for (const Value& p : *pat.list)
      if (one(p)) return true;
    return false;
  }
  return one(pat);
}

Value split(const std::string& s, const CallArgs& a, bool from_right) {
  const Value* sep = a.get(0, "sep");
  std::int64_t maxsplit = int_arg(a, 1, "maxsplit", -1);
  List out;
  if (!sep || sep->is_none()) {  // split on runs of whitespace
    std::vector<std::string> words;
    std::size_t k = 0;
    while (true) {
      while (k < s.size() && is_py_space(s[k])) ++k;
      if (k >= s.size()) break;
      if (!from_right && maxsplit >= 0 && static_cast<std::int64_t>(words.size()) == maxsplit) {
        std::string rest = s.substr(k);
        while (!rest.empty() && is_py_space(rest.back())) rest.pop_back();
        words.push_back(rest);
        break;
      }
      std::size_t b = k;
      while (k < s.size() && !is_py_space(s[k])) ++k;
      words.push_back(s.substr(b, k - b));
    }
    if (from_right && maxsplit >= 0 && static_cast<std::int64_t>(words.size()) > maxsplit + 1) {
      // Rejoin the leftmost words with their original spacing.
      std::size_t keep = static_cast<std::size_t>(maxsplit);
      std::string t = s;
      while (!t.empty() && is_py_space(t.back())) t.pop_back();
      std::size_t end = t.size();
      std::vector<std::string> tail;
      for (std::size_t n = 0; n < keep; ++n) {
        std::size_t e = end;
        while (e > 0 && !is_py_space(t[e - 1])) --e;
        tail.insert(tail.begin(), t.substr(e, end - e));
        end = e;
        while (end > 0 && is_py_space(t[end - 1])) --end;
      }
      std::size_t b = 0;
      while (b < end && is_py_space(t[b])) ++b;
      words.assign(1, t.substr(b, end - b));
      words.insert(words.end(), tail.begin(), tail.end());
    }
    for (auto& w : words) out.push_back(Value::string(std::move(w)));
    return Value::make_list(std::move(out));
  }
  if (!sep->is_string()) runtime_error("split() separator must be str or None");
  if (sep->s.empty()) runtime_error("empty separator");
  std::vector<std::string> parts = split_string(s, sep->s);
  if (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) > maxsplit + 1) {
    std::size_t m = static_cast<std::size_t>(maxsplit);
    std::vector<std::string> merged;
    if (!from_right) {
      merged.assign(parts.begin(), parts.begin() + static_cast<std::ptrdiff_t>(m));
      std::string rest;
      for (std::size_t k = m; k < parts.size(); ++k) rest += (k > m ? sep->s : "") + parts[k];
      merged.push_back(rest);
    } else {
      std::size_t head = parts.size() - m;
      std::string rest;
      for (std::size_t k = 0; k < head; ++k) rest += (k ? sep->s : "") + parts[k];
      merged.push_back(rest);
      merged.insert(merged.end(), parts.begin() + static_cast<std::ptrdiff_t>(head), parts.end());
    }
    parts = std::move(merged);
  }
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::make_list(std::move(out));
}

// str.format with {} / {0} / {name} fields (no format specs beyond them).
std::string py_format(const std::string& fmt, const CallArgs& a) {
  std::string out;
  std::size_t auto_index = 0;
  for (std::size_t k = 0; k < fmt.size(); ++k) {
    char c = fmt[k];
    if (c == '{' && k + 1 < fmt.size() && fmt[k + 1] == '{') {
      out += '{';
      ++k;
    } else if (c == '}' && k + 1 < fmt.size() && fmt[k + 1] == '}') {
      out += '}';
      ++k;
    } else if (c == '{') {
      std::size_t close = fmt.find('}', k);
      if (close == std::string::npos) runtime_error("format(): single '{' encountered");
      std::string field = fmt.substr(k + 1, close - k - 1);
      if (field.find(':') != std::string::npos || field.find('!') != std::string::npos)
        runtime_error("format(): format specs are not supported");
      const Value* v = nullptr;
      if (field.empty()) {
        v = auto_index < a.pos.size() ? &a.pos[auto_index] : nullptr;
        ++auto_index;
      } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
        std::size_t idx = std::stoul(field);
        v = idx < a.pos.size() ? &a.pos[idx] : nullptr;
      } else {
        for (const auto& kv : a.kw)
          if (kv.first == field) v = &kv.second;
      }
      if (!v) runtime_error("format(): missing value for field '{" + field + "}'");
      out += v->str();
      k = close;
    } else {
      out += c;
    }
  }
  return out;
}

Value string_method(const Value& self, const std::string& name, CallArgs& a) {
  const std::string& s = self.s;
  if (name == "startswith" || name == "endswith")
    return Value::boolean(affix_match(s, arg(a, 0, "prefix", name.c_str()), name == "startswith"));
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value* chars = a.get(0, "chars");
    const std::string* cs = (chars && chars->is_string()) ? &chars->s : nullptr;
    return Value::string(strip_chars(s, cs, name != "rstrip", name != "lstrip"));
  }
  if (name == "split") return split(s, a, false);
  if (name == "rsplit") return split(s, a, true);
  if (name == "splitlines") {
    List out;
    for (auto& l : split_lines(s)) out.push_back(Value::string(std::move(l)));
    return Value::make_list(std::move(out));
  }
  if (name == "upper") return Value::string(case_map(s, CaseMode::kUpper));
  if (name == "lower") return Value::string(case_map(s, CaseMode::kLower));
  if (name == "title") return Value::string(case_map(s, CaseMode::kPyTitle));
  if (name == "capitalize") return Value::string(case_map(s, CaseMode::kCapitalize));
  if (name == "replace") {
    std::int64_t count = int_arg(a, 2, "count", -1);
    return Value::string(replace_all(s, str_arg(a, 0, "old", "replace"), str_arg(a, 1, "new", "replace"), count));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    const std::string& sub = str_arg(a, 0, "sub", name.c_str());
    std::size_t at = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
    if (at == std::string::npos) {
      if (name.find("index") != std::string::npos) runtime_error("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(static_cast<std::int64_t>(utf8_length(std::string_view(s).substr(0, at))));
  }
  if (name == "count") {
    const std::string& sub = str_arg(a, 0, "sub", "count");
    if (sub.empty()) return Value::integer(static_cast<std::int64_t>(utf8_length(s) + 1));
    std::int64_t n = 0;
    for (std::size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
    return Value::integer(n);
  }
  if (name == "format") return Value::string(py_format(s, a));
  if (name == "join") {
    std::string out;
    List items = iterate(arg(a, 0, "iterable", "join"));
    for (std::size_t k = 0; k < items.size(); ++k) out += (k ? s : "") + items[k].str();
    return Value::string(std::move(out));
  }
  auto all_of = [&](auto pred) {
    if (s.empty()) return Value::boolean(false);
    for (unsigned char c : s)
      if (!pred(c)) return Value::boolean(false);
    return Value::boolean(true);
  };
  if (name == "isdigit") return all_of([](unsigned char c) { return std::isdigit(c) != 0; });
  if (name == "isalpha") return all_of([](unsigned char c) { return std::isalpha(c) != 0 || c >= 0x80; });
  if (name == "isalnum") return all_of([](unsigned char c) { return std::isalnum(c) != 0 || c >= 0x80; });
  if (name == "isspace") return all_of([](unsigned char c) { return is_py_space(static_cast<char>(c)); });
  if (name == "islower") return Value::boolean(s != case_map(s, CaseMode::kUpper) && s == case_map(s, CaseMode::kLower));
  if (name == "isupper") return Value::boolean(s != case_map(s, CaseMode::kLower) && s == case_map(s, CaseMode::kUpper));
  runtime_error("'str' object has no method '" + name + "'");
}

Value dict_method(const Value& self, const std::string& name, CallArgs& a) {
  const Dict& d = *self.dict;
  if (name == "get") {
    const Value& key = arg(a, 0, "key", "get");
    const Value* v = key.is_string() ? d.find(key.s) : nullptr;
    if (v) return *v;
    const Value* def = a.get(1, "default");
    return def ? *def : Value::none();
  }
  List out;
  for (const auto& [k, v] : d.items) {
    if (name == "items") out.push_back(Value::make_list({Value::string(k), v}, true));
    else if (name == "keys") out.push_back(Value::string(k));
    else out.push_back(v);
  }
  return Value::make_list(std::move(out));
}

Value list_method(const Value& self, const std::string& name, CallArgs& a) {
  List& l = *self.list;
  if (name == "append") {
    const Value& v = arg(a, 0, "object", "append");
    if (v.is_list() && v.list == self.list) runtime_error("cannot append a list to itself");
    l.push_back(v);
    return Value::none();
  }
  if (name == "extend") {
    List items = iterate(arg(a, 0, "iterable", "extend"));
    l.insert(l.end(), items.begin(), items.end());
    return Value::none();
  }
  if (name == "index" || name == "count") {
    const Value& v = arg(a, 0, "value", name.c_str());
    std::int64_t n = 0;
    for (std::size_t k = 0; k < l.size(); ++k) {
      if (!values_equal(l[k], v)) continue;
      if (name == "index") return Value::integer(static_cast<std::int64_t>(k));
      ++n;
    }
    if (name == "index") runtime_error("value is not in list");
    return Value::integer(n);
  }
  runtime_error("'list' object has no method '" + name + "'");
}

bool known_method(const Value& obj, const std::string& n) {
  if (obj.is_string())
    return n == "startswith" || n == "endswith" || n == "strip" || n == "lstrip" || n == "rstrip" || n == "split" ||
           n == "rsplit" || n == "splitlines" || n == "upper" || n == "lower" || n == "title" || n == "capitalize" ||
           n == "replace" || n == "find" || n == "rfind" || n == "index" || n == "rindex" || n == "count" ||
           n == "format" || n == "join" || n == "isdigit" || n == "isalpha" || n == "isalnum" || n == "isspace" ||
           n == "islower" || n == "isupper";
  if (obj.is_dict()) return n == "get" || n == "items" || n == "keys" || n == "values";
  if (obj.is_list()) return n == "append" || n == "extend" || n == "index" || n == "count";
  return false;
}

}  // namespace

Value get_method(const Value& obj, const std::string& name) {
  if (!known_method(obj, name)) return Value::undefined(name);
  Value self = obj;
  return Value::callable([self, name](Interpreter&, CallArgs& a) {
    if (self.is_string()) return string_method(self, name, a);
    if (self.is_dict()) return dict_method(self, name, a);
    return list_method(self, name, a);
  });
}

List iterate(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList: return *v.list;
    case Value::Kind::kDict: {
      List keys;
      for (const auto& kv : v.dict->items) keys.push_back(Value::string(kv.first));
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      for (auto& c : utf8_chars(v.s)) chars.push_back(Value::string(std::move(c)));
      return chars;
    }
    default: runtime_error(std::string("'") + v.type_name() + "' object is not iterable");
  }
}

void install_globals(Dict& g) {
  g.set("range", Value::callable([](Interpreter& in, CallArgs& a) {
          if (a.pos.empty() || a.pos.size() > 3) runtime_error("range() takes 1 to 3 arguments");
          for (const Value& v : a.pos)
            if (v.kind != Value::Kind::kInt && v.kind != Value::Kind::kBool) runtime_error("range() arguments must be integers");
          std::int64_t start = 0, stop, step = 1;
          if (a.pos.size() == 1) {
            stop = a.pos[0].i;
          } else {
            start = a.pos[0].i;
            stop = a.pos[1].i;
            if (a.pos.size() == 3) step = a.pos[2].i;
          }
          if (step == 0) runtime_error("range() arg 3 must not be zero");
          std::int64_t n = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                                    : (start > stop ? (start - stop - step - 1) / -step : 0);
          in.count_iterations(static_cast<std::uint64_t>(n));
          List out;
          for (std::int64_t k = 0; k < n; ++k) out.push_back(Value::integer(start + k * step));
          return Value::make_list(std::move(out));
        }));
  g.set("namespace", Value::callable([](Interpreter&, CallArgs& a) {
          Value ns = Value::make_namespace();
          for (const Value& p : a.pos) {
            if (!p.is_dict()) runtime_error("namespace() positional argument must be a mapping");
            for (const auto& [k, v] : p.dict->items) ns.dict->set(k, v);
          }
          for (const auto& [k, v] : a.kw) ns.dict->set(k, v);
          return ns;
        }));
  g.set("dict", Value::callable([](Interpreter&, CallArgs& a) {
          Value d = Value::make_dict();
          for (const Value& p : a.pos)
            if (p.is_dict())
              for (const auto& [k, v] : p.dict->items) d.dict->set(k, v);
          for (const auto& [k, v] : a.kw) d.dict->set(k, v);
          return d;
        }));
  g.set("raise_exception", Value::callable([](Interpreter&, CallArgs& a) -> Value {
          runtime_error(a.pos.empty() ? std::string("raise_exception() called") : a.pos[0].str());
        }));
  g.set("strftime_now", Value::callable([](Interpreter&, CallArgs& a) {
          const Value* fmt = a.get(0, "format");
          if (!fmt || !fmt->is_string()) runtime_error("strftime_now() needs a format string");
          std::time_t now = std::time(nullptr);
          std::tm tm{};
          localtime_r(&now, &tm);
          char buf[256];
          std::size_t n = std::strftime(buf, sizeof buf, fmt->s.c_str(), &tm);
          return Value::string(std::string(buf, n));
        }));
}

}  // namespace loragate::jinja
