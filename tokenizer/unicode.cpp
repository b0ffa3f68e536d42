#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <cstdlib>

namespace loragate::tok {

size_t utf8_valid_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const size_t n = s.size();
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
  // Ranges of the second byte follow the Unicode "well-formed UTF-8" table.
  size_t len = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (i + 1 >= n || b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    if (i + k >= n || (b(i + k) & 0xC0) != 0x80) return 0;
  }
  return len;
}

char32_t utf8_next(std::string_view s, size_t& i) {
  const auto c = static_cast<uint8_t>(s[i]);
  if (c < 0x80) {
    ++i;
    return c;
  }
  size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
  char32_t cp = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  i += len;
  return cp;
}

namespace {
// Length of the longest prefix at s[i] that could start a valid sequence but
// is cut short or broken: Rust replaces that whole "maximal subpart" by one
// U+FFFD. Always at least 1.
size_t invalid_subpart_len(std::string_view s, size_t i) {
  const auto c = static_cast<uint8_t>(s[i]);
  size_t len = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 1;
  }
  size_t k = 1;
  if (i + k < s.size() && static_cast<uint8_t>(s[i + k]) >= lo && static_cast<uint8_t>(s[i + k]) <= hi) {
    ++k;
    while (k < len && i + k < s.size() && (static_cast<uint8_t>(s[i + k]) & 0xC0) == 0x80) ++k;
  }
  return k;
}
}  // namespace

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t len = utf8_valid_len(s, i);
    if (len) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      i += invalid_subpart_len(s, i);
    }
  }
  return out;
}

bool utf8_is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t len = utf8_valid_len(s, i);
    if (!len) return false;
    i += len;
  }
  return true;
}

size_t utf8_incomplete_tail(std::string_view s) {
  // A character is at most 4 bytes, so only the last 3 bytes can be a cut start.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    size_t i = s.size() - back;
    auto c = static_cast<uint8_t>(s[i]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking back
    if (c < 0x80) return 0;
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    return need > back && invalid_subpart_len(s, i) == back ? back : 0;
  }
  return 0;
}

bool is_white_space(char32_t c) {
  if (c >= 0x09 && c <= 0x0D) return true;
  switch (c) {
    case 0x20: case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

std::string normalize_form(std::string_view s, NormalForm form) {
  if (s.empty()) return {};
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNFC: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::kNFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::kNFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::kNFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* dst = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                    static_cast<utf8proc_ssize_t>(s.size()), &dst,
                                    static_cast<utf8proc_option_t>(options));
  if (n < 0) return std::string(s);  // only on invalid UTF-8, which callers never pass
  std::string out(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
  std::free(dst);
  return out;
}

namespace {
bool is_cased_letter(char32_t c) {
  return utf8proc_tolower(static_cast<utf8proc_int32_t>(c)) != static_cast<utf8proc_int32_t>(c) ||
         utf8proc_toupper(static_cast<utf8proc_int32_t>(c)) != static_cast<utf8proc_int32_t>(c);
}
}  // namespace

std::string to_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool prev_cased = false;
  for (size_t i = 0; i < s.size();) {
    char32_t c = utf8_next(s, i);
    if (c == 0x130) {  // İ lowercases to i + combining dot above
      out += "i\xCC\x87";
    } else if (c == 0x3A3) {  // Σ: final form at the end of a word
      bool next_cased = false;
      if (i < s.size()) {
        size_t j = i;
        next_cased = is_cased_letter(utf8_next(s, j));
      }
      utf8_append(out, prev_cased && !next_cased ? 0x3C2 : 0x3C3);
    } else {
      utf8_append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
    prev_cased = is_cased_letter(c);
  }
  return out;
}

std::string strip_accents(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    char32_t c = utf8_next(s, i);
    if (utf8proc_category(static_cast<utf8proc_int32_t>(c)) != UTF8PROC_CATEGORY_MN) {
      out.append(s.substr(start, i - start));
    }
  }
  return out;
}

const std::array<char32_t, 256>& byte_to_char() {
  // Printable Latin-1 bytes map to themselves; the other 68 bytes map, in
  // order, to U+0100 and up, so every byte becomes one visible character.
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      t[static_cast<size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

int char_to_byte(char32_t c) {
  static const std::array<int16_t, 324> inverse = [] {
    std::array<int16_t, 324> t{};
    t.fill(-1);
    const auto& fwd = byte_to_char();
    for (int b = 0; b < 256; ++b) t[fwd[static_cast<size_t>(b)]] = static_cast<int16_t>(b);
    return t;
  }();
  return c < inverse.size() ? inverse[c] : -1;
}

}  // namespace loragate::tok
