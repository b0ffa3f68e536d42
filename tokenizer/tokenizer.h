// Tokenizer: Hugging Face tokenizer.json (BPE) encode/decode.
//
// Supports what real Llama-family files use: the SentencePiece style
// (Prepend/Replace or Metaspace normaliser, byte_fallback, ▁ decoder) of
// Llama 2, Mistral and stories260K, and the byte-level style of Llama 3 and
// Qwen2/3 (NFC, Split regex + ByteLevel pre-tokeniser, ignore_merges).
// Added and special tokens are matched before the model runs.
//
// A Tokenizer is immutable after load() and safe to use from many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace loragate {

class TokenizerImpl;

class Tokenizer {
 public:
  // Loads `dir`/tokenizer.json and, when present, `dir`/tokenizer_config.json
  // (add_bos_token / add_eos_token, bos/eos token names). Malformed files give
  // a Status naming the file and the key.
  static Result<std::unique_ptr<Tokenizer>> load(const std::string& dir);
  // Same, from explicit paths; `config_path` may be empty.
  static Result<std::unique_ptr<Tokenizer>> load_files(const std::string& tokenizer_json_path,
                                                       const std::string& config_path);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Encodes `text`. With `add_special_tokens`, applies the post-processor
  // (e.g. a leading BOS), exactly as HF tokenizers' encode(text, add_special_tokens).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // Decodes ids to text as HF's decode(ids, skip_special_tokens) (no clean-up of spaces).
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  int32_t vocab_size() const;  // including added tokens
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;  // "" when out of range
  // The raw bytes token `id` adds mid-text (a piece of a character possibly;
  // no start-of-text space stripping); "" when out of range. What grammar
  // masks match against.
  std::string token_bytes(int32_t id) const;
  bool is_special(int32_t id) const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;

 private:
  explicit Tokenizer(std::unique_ptr<TokenizerImpl> impl);
  std::unique_ptr<TokenizerImpl> impl_;
};

// Turns a stream of generated ids into text pieces for streaming. It never
// emits broken UTF-8: a piece ending in an incomplete multi-byte character is
// held back until the next ids complete it. The concatenation of all pieces
// equals tokenizer.decode(all ids, skip_special_tokens) for the continuation.
class IncrementalDecoder {
 public:
  // `prompt_ids` gives left context (so SentencePiece's leading-space rule
  // decodes the first generated token as it appears mid-text); may be empty.
  IncrementalDecoder(const Tokenizer& tokenizer, std::span<const int32_t> prompt_ids,
                     bool skip_special_tokens);
  // Adds one id; returns the text that became final (possibly empty).
  std::string push(int32_t id);
  // Returns whatever is still held back (replacement chars for broken UTF-8).
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;  // ids_[prefix_offset_..read_offset_) decode to text already emitted
  size_t read_offset_ = 0;
};

}  // namespace loragate
