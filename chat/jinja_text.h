// UTF-8 string helpers with Python str semantics, for filters and methods.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loragate::jinja {

// Python's ASCII whitespace (str.strip()/split() also strip Unicode spaces; not here).
inline bool is_py_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == '\x1c' || c == '\x1d' ||
         c == '\x1e' || c == '\x1f';
}

// str.strip/lstrip/rstrip; `chars` null means whitespace, else any of its code points.
std::string strip_chars(const std::string& s, const std::string* chars, bool left, bool right);
// str.split(sep) with a non-empty separator.
std::vector<std::string> split_string(const std::string& s, const std::string& sep);
// str.splitlines() for \n, \r\n and \r.
std::vector<std::string> split_lines(const std::string& s);
// str.replace(old, new, count); count < 0 replaces all.
std::string replace_all(const std::string& s, const std::string& from, const std::string& to, std::int64_t count);

enum class CaseMode { kUpper, kLower, kCapitalize, kPyTitle, kJinjaTitle };
// Unicode case mapping (utf8proc): str.upper/lower/capitalize/title and Jinja's |title.
std::string case_map(const std::string& s, CaseMode mode);

// HTML escaping of & < > " ' (Jinja's |escape).
std::string html_escape(const std::string& s);

}  // namespace loragate::jinja
