// The state behind loragate::Tokenizer: the parsed tokenizer.json pipeline
// (added tokens -> normaliser -> pre-tokeniser -> BPE -> post-processor, and
// the decoder), plus the BOS/EOS facts of tokenizer_config.json.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/json_reader.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"

namespace loragate {

class TokenizerImpl {
 public:
  // Parses tokenizer.json at `json_path` and, unless empty, the config at `config_path`.
  static Result<std::unique_ptr<TokenizerImpl>> load(const std::string& json_path, const std::string& config_path);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  int32_t vocab_size() const { return vocab_size_; }
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // nullptr when `id` names no token.
  const std::string* token_of(int32_t id) const;
  std::string token_bytes(int32_t id) const;
  bool is_special(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < special_.size() && special_[static_cast<size_t>(id)];
  }
  std::optional<int32_t> bos_id() const { return bos_id_; }
  std::optional<int32_t> eos_id() const { return eos_id_; }

 private:
  TokenizerImpl() = default;
  Status parse_tokenizer(tok::TokenizerFile& parsed, const std::string& file);
  Status parse_added_tokens(const tok::Json& root, const std::string& file);
  Status parse_config(const tok::Json& config, const std::string& file);
  // Normalised plain text -> ids through the pre-tokeniser and the model.
  void encode_plain(std::string text, bool at_origin, std::vector<int32_t>& ids) const;

  std::unique_ptr<tok::BpeModel> model_;
  std::unique_ptr<tok::Normalizer> normalizer_;      // may be null
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer_;  // may be null
  std::unique_ptr<tok::Decoder> decoder_;            // may be null: tokens joined by " "
  tok::PostProcessor post_processor_;

  std::vector<tok::AddedToken> added_;
  std::unordered_map<std::string, int32_t> added_by_content_;
  std::unordered_map<int32_t, size_t> added_by_id_;  // id -> index into added_
  tok::AddedTokenMatcher raw_matcher_;         // tokens with normalized=false
  tok::AddedTokenMatcher normalized_matcher_;  // tokens with normalized=true
  std::vector<bool> special_;                  // by id

  int32_t vocab_size_ = 0;
  // tokenizer_config.json's add_bos_token / add_eos_token, used only when the
  // post-processor adds no tokens itself (tokenizer.json wins).
  bool config_add_bos_ = false;
  bool config_add_eos_ = false;
  std::optional<int32_t> bos_id_, eos_id_;
};

}  // namespace loragate
