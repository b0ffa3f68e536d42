#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace loragate::tok {

std::string rewrite_whitespace_classes(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[i + 1];
      ++i;
      if (e == 's') {
        out += in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
      } else if (e == 'S' && !in_class) {
        out += "[^\\s\\x{85}]";
      } else {
        out += '\\';
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
      size_t end = p.find(":]", i + 2);
      if (end != std::string_view::npos) {
        out.append(p.substr(i, end + 2 - i));
        i = end + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

Result<std::shared_ptr<const Regex>> Regex::compile(std::string_view pattern, bool literal) {
  std::string source = literal ? std::string(pattern) : rewrite_whitespace_classes(pattern);
  uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(), options,
                                   &error, &error_offset, nullptr);
  if (!code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(error, buf, sizeof(buf));
    return Status::corrupt("bad regex /" + std::string(pattern) + "/ at offset " + std::to_string(error_offset) +
                           ": " + reinterpret_cast<const char*>(buf));
  }
  // JIT is an optimisation only: when unavailable, the interpreter runs.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  std::shared_ptr<Regex> regex(new Regex());
  regex->code_ = code;
  return std::shared_ptr<const Regex>(std::move(regex));
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  auto* code = static_cast<pcre2_code*>(code_);
  // Match data per call keeps concurrent callers independent.
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  if (!md) return out;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  size_t last_match_end = SIZE_MAX;
  while (pos <= text.size()) {
    int rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
    }
    if (rc < 0) break;  // no match (or a resource limit: treat the rest as unmatched)
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t s = ov[0], e = ov[1];
    if (s == e) {
      // Empty match: step one character on, and drop it when it touches the previous match.
      size_t step = 1;
      while (e + step < text.size() && (static_cast<uint8_t>(text[e + step]) & 0xC0) == 0x80) ++step;
      pos = e + step;
      if (last_match_end == e) continue;
    } else {
      pos = e;
    }
    last_match_end = e;
    out.emplace_back(s, e);
  }
  pcre2_match_data_free(md);
  return out;
}

}  // namespace loragate::tok
