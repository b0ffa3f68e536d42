// Added tokens ("added_tokens" of tokenizer.json): found in the text before the
// model runs, leftmost-longest, with HF's lstrip / rstrip / single_word rules.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loragate::tok {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool normalized = false;  // matched in normalised text instead of raw text
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// A split of some text: either an added token (`id` >= 0) or plain text.
struct Segment {
  size_t begin, end;  // byte range in the text
  int32_t id;         // -1 for plain text
};

// Multi-pattern matcher over a fixed set of added tokens: a byte trie walked
// from each position whose first byte can start a token.
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `patterns[i]` is what to look for; it stands for `tokens[i]`.
  AddedTokenMatcher(std::vector<std::string> patterns, std::vector<AddedToken> tokens);
  bool empty() const { return tokens_.empty(); }
  // Splits `text` into plain segments and token segments (no empty plain ones).
  std::vector<Segment> split(std::string_view text) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // byte -> node index
    int32_t token = -1;                                // index into tokens_ ending here
  };
  // Longest token starting at text[pos]: its index and length, or {-1, 0}.
  std::pair<int32_t, size_t> longest_at(std::string_view text, size_t pos) const;

  std::vector<Node> nodes_;
  std::vector<AddedToken> tokens_;
  bool first_byte_[256] = {};
};

}  // namespace loragate::tok
