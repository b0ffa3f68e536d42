// The BPE model of tokenizer.json ("model": {"type": "BPE"}): vocabulary,
// ranked merges, byte fallback and unknown-token handling, as HF tokenizers'
// BPE::tokenize (without dropout).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "tokenizer/json_reader.h"
#include "tokenizer/json_util.h"

namespace loragate::tok {

class BpeModel {
 public:
  // `model` is the "model" object (options), `tables` its vocab and merges;
  // `where` names file and key for errors.
  static Result<std::unique_ptr<BpeModel>> load(const Json& model, BpeTables tables, const std::string& where);

  // Appends the ids of one pre-tokenised piece to `out`.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // nullptr when `id` is not in the vocabulary.
  const std::string* id_to_token(int32_t id) const;
  // One past the largest id in the vocabulary.
  int32_t vocab_size() const { return static_cast<int32_t>(id_to_token_.size()); }

 private:
  struct Merge {
    uint32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  const Merge* find_merge(int32_t a, int32_t b) const {
    auto it = merges_.find(pair_key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  }
  // Splits `word` into characters (with byte fallback / unk), then merges.
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  std::vector<std::string> id_to_token_;        // "" for holes
  std::vector<bool> has_id_;                    // id_to_token_[i] is a real entry
  std::unordered_map<std::string_view, int32_t> vocab_;  // views into id_to_token_
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank, merged id
  std::array<int32_t, 256> byte_ids_{};         // id of "<0xNN>", -1 when absent
  std::optional<int32_t> unk_id_;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
};

}  // namespace loragate::tok
