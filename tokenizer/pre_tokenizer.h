// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): split a normalised text
// segment into pieces that the model then encodes one by one.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "tokenizer/json_util.h"
#include "tokenizer/regex.h"

namespace loragate::tok {

struct Piece {
  std::string text;
  // True when the piece begins where the original input begins (offset 0);
  // Metaspace's prepend_scheme "first" only prepends to such a piece.
  bool at_origin = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their refinement; empty pieces are dropped.
  virtual void pre_tokenize(std::vector<Piece>& pieces) const = 0;
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// HF's NormalizedString::split: byte ranges of the pieces `text` splits into
// around the matches of `regex`, per `behavior` (`invert` swaps matches and gaps).
std::vector<std::pair<size_t, size_t>> split_ranges(std::string_view text, const Regex& regex,
                                                    SplitBehavior behavior, bool invert);

// Supported: Sequence, Split, ByteLevel, Metaspace, Digits, Whitespace,
// WhitespaceSplit. Others give Status::unsupported naming the type.
Result<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(const Json& j, const std::string& where);

}  // namespace loragate::tok
