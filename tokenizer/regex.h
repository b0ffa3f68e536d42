// PCRE2 wrapper with the matching rules tokenizer.json regexes expect.
//
// HF tokenizers compile these patterns with Oniguruma, whose \s is Unicode's
// White_Space. PCRE2's \s (with UCP) lacks U+0085, so compile() rewrites \s and
// \S to include it. Compiled once, JIT when available; matching is thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace loragate::tok {

class Regex {
 public:
  // Compiles `pattern` (UTF, UCP); with `literal`, the pattern is a plain string.
  static Result<std::shared_ptr<const Regex>> compile(std::string_view pattern, bool literal);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Byte ranges [begin, end) of the successive non-overlapping matches in
  // `text` (valid UTF-8), left to right, as Oniguruma's find_iter gives them.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  Regex() = default;
  void* code_ = nullptr;  // pcre2_code_8*
};

// Exposed for tests: the Oniguruma-compatible rewrite of \s and \S.
std::string rewrite_whitespace_classes(std::string_view pattern);

}  // namespace loragate::tok
