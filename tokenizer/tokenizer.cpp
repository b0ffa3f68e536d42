// Tokenizer: the public façade, and the encode / decode pipelines.
#include "tokenizer/tokenizer.h"

#include <filesystem>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace loragate {

// ---- encode / decode ---------------------------------------------------------

std::vector<int32_t> TokenizerImpl::encode(std::string_view input, bool add_special_tokens) const {
  // Every stage works on valid UTF-8 (HF takes a Rust &str); repair the input once.
  std::string text = tok::utf8_is_valid(input) ? std::string(input) : tok::utf8_lossy(input);
  std::vector<int32_t> ids;
  // Added tokens are found in the raw text first; each text segment between
  // them is normalised on its own (so Prepend runs once per segment).
  for (const tok::Segment& seg : raw_matcher_.split(text)) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    std::string part = text.substr(seg.begin, seg.end - seg.begin);
    if (normalizer_) normalizer_->normalize(part);
    if (normalized_matcher_.empty()) {
      encode_plain(std::move(part), seg.begin == 0, ids);
      continue;
    }
    for (const tok::Segment& sub : normalized_matcher_.split(part)) {
      if (sub.id >= 0) {
        ids.push_back(sub.id);
      } else {
        encode_plain(part.substr(sub.begin, sub.end - sub.begin), seg.begin == 0 && sub.begin == 0, ids);
      }
    }
  }
  if (!add_special_tokens) return ids;
  if (post_processor_.adds_tokens()) return post_processor_.process(ids);
  // No template in tokenizer.json: fall back on tokenizer_config.json's flags.
  if (config_add_bos_ && bos_id_) ids.insert(ids.begin(), *bos_id_);
  if (config_add_eos_ && eos_id_) ids.push_back(*eos_id_);
  return ids;
}

void TokenizerImpl::encode_plain(std::string text, bool at_origin, std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  if (!pre_tokenizer_) {
    model_->tokenize(text, ids);
    return;
  }
  std::vector<tok::Piece> pieces;
  pieces.push_back({std::move(text), at_origin});
  pre_tokenizer_->pre_tokenize(pieces);
  for (const auto& p : pieces) model_->tokenize(p.text, ids);
}

std::string TokenizerImpl::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const std::string* t = token_of(id);
    if (!t) continue;  // unknown ids are dropped, as HF does
    if (skip_special_tokens && is_special(id)) continue;
    tokens.push_back(*t);
  }
  std::string text;
  if (decoder_) {
    decoder_->decode_chain(tokens);
    for (const auto& t : tokens) text += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) text += ' ';
      text += tokens[i];
    }
  }
  return tok::utf8_is_valid(text) ? text : tok::utf8_lossy(text);
}

std::optional<int32_t> TokenizerImpl::token_to_id(std::string_view token) const {
  if (!added_by_content_.empty()) {
    auto it = added_by_content_.find(std::string(token));
    if (it != added_by_content_.end()) return it->second;
  }
  return model_->token_to_id(token);
}

const std::string* TokenizerImpl::token_of(int32_t id) const {
  if (auto it = added_by_id_.find(id); it != added_by_id_.end()) return &added_[it->second].content;
  return model_->id_to_token(id);
}

std::string TokenizerImpl::token_bytes(int32_t id) const {
  const std::string* t = token_of(id);
  if (t == nullptr) return {};
  std::string bytes = *t;
  if (decoder_) decoder_->token_bytes(bytes);
  return bytes;
}

// ---- Tokenizer façade ----------------------------------------------------------

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::load(const std::string& dir) {
  std::filesystem::path base(dir);
  std::string config = (base / "tokenizer_config.json").string();
  if (!std::filesystem::exists(config)) config.clear();
  return load_files((base / "tokenizer.json").string(), config);
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::load_files(const std::string& tokenizer_json_path,
                                                         const std::string& config_path) {
  LG_ASSIGN_OR_RETURN(auto impl, TokenizerImpl::load(tokenizer_json_path, config_path));
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return impl_->encode(text, add_special_tokens);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return impl_->decode(ids, skip_special_tokens);
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size(); }
std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const { return impl_->token_to_id(token); }
std::string Tokenizer::id_to_token(int32_t id) const {
  const std::string* t = impl_->token_of(id);
  return t ? *t : std::string();
}
bool Tokenizer::is_special(int32_t id) const { return impl_->is_special(id); }
std::string Tokenizer::token_bytes(int32_t id) const { return impl_->token_bytes(id); }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos_id(); }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos_id(); }

}  // namespace loragate
