#include "chat/jinja_text.h"

#include <utf8proc.h>

#include "chat/jinja_value.h"

namespace loragate::jinja {

std::string strip_chars(const std::string& s, const std::string* chars, bool left, bool right) {
  if (!chars) {
    std::size_t b = 0, e = s.size();
    if (left)
      while (b < e && is_py_space(s[b])) ++b;
    if (right)
      while (e > b && is_py_space(s[e - 1])) --e;
    return s.substr(b, e - b);
  }
  std::vector<std::string> set = utf8_chars(*chars);
  std::vector<std::string> cs = utf8_chars(s);
  auto in_set = [&](const std::string& c) {
    for (const auto& x : set)
      if (x == c) return true;
    return false;
  };
  std::size_t b = 0, e = cs.size();
  if (left)
    while (b < e && in_set(cs[b])) ++b;
  if (right)
    while (e > b && in_set(cs[e - 1])) --e;
  std::string out;
  for (std::size_t k = b; k < e; ++k) out += cs[k];
  return out;
}

std::vector<std::string> split_string(const std::string& s, const std::string& sep) {
  std::vector<std::string> parts;
  std::size_t b = 0;
  for (std::size_t at = s.find(sep); at != std::string::npos; at = s.find(sep, b)) {
    parts.push_back(s.substr(b, at - b));
    b = at + sep.size();
  }
  parts.push_back(s.substr(b));
  return parts;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::string cur;
  for (std::size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '\n' || s[k] == '\r') {
      lines.push_back(cur);
      cur.clear();
      if (s[k] == '\r' && k + 1 < s.size() && s[k + 1] == '\n') ++k;
    } else {
      cur += s[k];
    }
  }
  if (!cur.empty()) lines.push_back(cur);
  return lines;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, std::int64_t count) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` around every code point
    std::vector<std::string> cs = utf8_chars(s);
    std::int64_t n = 0;
    for (const auto& c : cs) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      out += c;
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  std::size_t b = 0;
  std::int64_t n = 0;
  for (std::size_t at = s.find(from); at != std::string::npos && (count < 0 || n < count); at = s.find(from, b)) {
    out.append(s, b, at - b);
    out += to;
    b = at + from.size();
    ++n;
  }
  out.append(s, b, std::string::npos);
  return out;
}

namespace {

void put(std::string& out, utf8proc_int32_t cp) {
  utf8proc_uint8_t buf[4];
  utf8proc_ssize_t n = utf8proc_encode_char(cp, buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(n));
}

bool is_cased(utf8proc_int32_t cp) { return utf8proc_tolower(cp) != cp || utf8proc_toupper(cp) != cp; }

bool jinja_word_break(utf8proc_int32_t cp) {
  return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || (cp < 0x80 && is_py_space(static_cast<char>(cp)));
}

}  // namespace

std::string case_map(const std::string& s, CaseMode mode) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(s.size());
  bool first = true, prev_cased = false, prev_break = true;
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) {  // invalid byte: copy it through
      out += static_cast<char>(*p);
      ++p;
      --left;
      first = false;
      continue;
    }
    utf8proc_int32_t m = cp;
    switch (mode) {
      case CaseMode::kUpper: m = utf8proc_toupper(cp); break;
      case CaseMode::kLower: m = utf8proc_tolower(cp); break;
      case CaseMode::kCapitalize: m = first ? utf8proc_totitle(cp) : utf8proc_tolower(cp); break;
      case CaseMode::kPyTitle:
        if (is_cased(cp)) {
          m = prev_cased ? utf8proc_tolower(cp) : utf8proc_totitle(cp);
          prev_cased = true;
        } else {
          prev_cased = false;
        }
        break;
      case CaseMode::kJinjaTitle:
        if (jinja_word_break(cp)) {
          prev_break = true;
        } else {
          m = prev_break ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
          prev_break = false;
        }
        break;
    }
    put(out, m);
    p += n;
    left -= n;
    first = false;
  }
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace loragate::jinja
