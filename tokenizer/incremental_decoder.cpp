// IncrementalDecoder: streaming detokenisation by re-decoding a short window.
//
// ids_[prefix_offset_, read_offset_) is text already emitted; decoding it and
// decoding ids_[prefix_offset_, end) and taking the difference gives the new
// text with the same left context, so decoder rules that depend on position
// (SentencePiece's leading-space strip) cancel out. Text that ends in U+FFFD
// may be an unfinished UTF-8 character and is held back until more ids come.
#include "tokenizer/tokenizer.h"

namespace loragate {
namespace {

// Prompt ids kept as left context: enough for any decoder rule we support.
constexpr size_t kPromptContext = 6;

bool ends_with_replacement(const std::string& s) { return s.ends_with("\xEF\xBF\xBD"); }

// The part of `full` after `prefix`, starting on a character boundary.
std::string text_after(const std::string& full, const std::string& prefix) {
  size_t cut = std::min(prefix.size(), full.size());
  while (cut < full.size() && (static_cast<uint8_t>(full[cut]) & 0xC0) == 0x80) ++cut;
  return full.substr(cut);
}

}  // namespace

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, std::span<const int32_t> prompt_ids,
                                       bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_(skip_special_tokens) {
  size_t keep = std::min(prompt_ids.size(), kPromptContext);
  ids_.assign(prompt_ids.end() - static_cast<std::ptrdiff_t>(keep), prompt_ids.end());
  prefix_offset_ = 0;
  read_offset_ = ids_.size();
}

std::string IncrementalDecoder::push(int32_t id) {
  ids_.push_back(id);
  std::span<const int32_t> all(ids_);
  std::string prefix = tokenizer_.decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), skip_special_);
  std::string full = tokenizer_.decode(all.subspan(prefix_offset_), skip_special_);
  if (full.size() <= prefix.size() || ends_with_replacement(full)) return {};
  std::string piece = text_after(full, prefix);
  // The emitted ids become the context of the next window; older ids go.
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(read_offset_));
  prefix_offset_ = 0;
  read_offset_ = ids_.size();
  return piece;
}

std::string IncrementalDecoder::flush() {
  std::span<const int32_t> all(ids_);
  std::string prefix = tokenizer_.decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), skip_special_);
  std::string full = tokenizer_.decode(all.subspan(prefix_offset_), skip_special_);
  std::string piece = full.size() > prefix.size() ? text_after(full, prefix) : std::string();
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(read_offset_));
  prefix_offset_ = 0;
  read_offset_ = ids_.size();
  return piece;
}

}  // namespace loragate
