#include "tokenizer/added_tokens.h"

#include <utf8proc.h>

#include "tokenizer/unicode.h"

namespace loragate::tok {

AddedTokenMatcher::AddedTokenMatcher(std::vector<std::string> patterns, std::vector<AddedToken> tokens)
    : tokens_(std::move(tokens)) {
  nodes_.emplace_back();
  for (size_t t = 0; t < patterns.size(); ++t) {
    const std::string& p = patterns[t];
    if (p.empty()) continue;  // an empty token can never be matched
    first_byte_[static_cast<uint8_t>(p[0])] = true;
    size_t node = 0;
    for (char ch : p) {
      auto c = static_cast<uint8_t>(ch);
      int32_t next = -1;
      for (auto [b, child] : nodes_[node].children) {
        if (b == c) next = child;
      }
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_[node].children.emplace_back(c, next);
        nodes_.emplace_back();
      }
      node = static_cast<size_t>(next);
    }
    // Two tokens with the same text: the first one keeps it.
    if (nodes_[node].token < 0) nodes_[node].token = static_cast<int32_t>(t);
  }
}

std::pair<int32_t, size_t> AddedTokenMatcher::longest_at(std::string_view text, size_t pos) const {
  std::pair<int32_t, size_t> best{-1, 0};
  size_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto c = static_cast<uint8_t>(text[i]);
    int32_t next = -1;
    for (auto [b, child] : nodes_[node].children) {
      if (b == c) next = child;
    }
    if (next < 0) break;
    node = static_cast<size_t>(next);
    if (nodes_[node].token >= 0) best = {nodes_[node].token, i + 1 - pos};
  }
  return best;
}

namespace {

bool is_word_char(char32_t c) {
  if (c == '_') return true;
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

// The character that ends just before `pos` (text is valid UTF-8, pos > 0).
char32_t char_before(std::string_view text, size_t pos, size_t* start = nullptr) {
  size_t i = pos - 1;
  while (i > 0 && (static_cast<uint8_t>(text[i]) & 0xC0) == 0x80) --i;
  if (start) *start = i;
  size_t j = i;
  return utf8_next(text, j);
}

}  // namespace

std::vector<Segment> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<Segment> out;
  size_t done = 0;  // end of the last token segment
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    auto [t, len] = longest_at(text, pos);
    if (t < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[static_cast<size_t>(t)];
    size_t start = pos, stop = pos + len;
    // Matches never overlap, so the search resumes after this one either way.
    pos = stop;
    if (tok.single_word) {
      bool space_before = start == 0 || !is_word_char(char_before(text, start));
      size_t j = stop;
      bool space_after = stop == text.size() || !is_word_char(utf8_next(text, j));
      if (!space_before || !space_after) continue;
    }
    if (tok.lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t cs = 0;
        if (!is_white_space(char_before(text, s, &cs))) break;
        s = cs;
      }
      start = std::max(s, done);
    }
    if (tok.rstrip) {
      while (stop < text.size()) {
        size_t j = stop;
        if (!is_white_space(utf8_next(text, j))) break;
        stop = j;
      }
      pos = stop;
    }
    if (done < start) out.push_back({done, start, -1});
    out.push_back({start, stop, tok.id});
    done = stop;
  }
  if (done < text.size()) out.push_back({done, text.size(), -1});
  return out;
}

}  // namespace loragate::tok
