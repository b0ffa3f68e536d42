// UTF-8 and Unicode helpers for the tokenizer: decoding, lossy repair,
// normalisation forms (utf8proc) and GPT-2's byte <-> printable-char map.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/utf8.h"

namespace loragate::tok {

// Length in bytes of the valid UTF-8 sequence starting at s[i], or 0 when the
// bytes there are not a complete, valid sequence (overlongs, surrogates and
// values above U+10FFFF are invalid, as in Rust's str).
size_t utf8_valid_len(std::string_view s, size_t i);
// Decodes one code point at s[i] (assumes valid UTF-8) and advances i.
char32_t utf8_next(std::string_view s, size_t& i);
using loragate::utf8_append;  // common/utf8.h
// Rust's String::from_utf8_lossy: each maximal invalid subpart becomes U+FFFD.
std::string utf8_lossy(std::string_view s);
bool utf8_is_valid(std::string_view s);
// Number of bytes at the end of `s` that form the start of a multi-byte
// character still missing bytes (0 when `s` ends on a character boundary).
size_t utf8_incomplete_tail(std::string_view s);

// Rust's char::is_whitespace (the Unicode White_Space property).
bool is_white_space(char32_t c);

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };
// Normalises valid UTF-8 text (NUL bytes allowed).
std::string normalize_form(std::string_view s, NormalForm form);
// Per-character lowercase (full mappings for the common special cases).
std::string to_lower(std::string_view s);
// Removes combining marks (general category Mn), as HF's StripAccents.
std::string strip_accents(std::string_view s);

// GPT-2's byte-level alphabet: every byte maps to one printable code point.
const std::array<char32_t, 256>& byte_to_char();
// Inverse of byte_to_char(): returns -1 for code points that are not in it.
int char_to_byte(char32_t c);

}  // namespace loragate::tok
