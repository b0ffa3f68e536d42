// Token masks: which tokens of a vocabulary may come next under a grammar.
//
// TokenVocabulary holds each token's bytes (as it adds them mid-text) in a
// byte trie; it is built once per tokenizer and shared, immutable, by every
// sequence. compute_token_mask walks that trie from a Matcher's state, one
// memoised transition per trie edge, dropping a whole subtree as soon as its
// prefix cannot follow: tokens that share a prefix share the work. Special
// tokens are never in a mask (the caller decides about EOS).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace loragate::grammar {

class TokenVocabulary {
 public:
  // `bytes[id]` is token id's bytes; `special[id]` (same size) keeps it out of every mask.
  TokenVocabulary(const std::vector<std::string>& bytes, const std::vector<bool>& special);
  static std::shared_ptr<const TokenVocabulary> from_tokenizer(const Tokenizer& tokenizer);

  int32_t size() const { return size_; }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }

  struct TrieNode {
    int32_t first_child = -1;
    int32_t next_sibling = -1;
    int32_t tokens_begin = 0;  // into tokens(): the ids whose bytes end here
    int32_t tokens_end = 0;
    uint8_t byte = 0;
  };
  const std::vector<TrieNode>& trie() const { return trie_; }  // trie()[0] is the root
  const std::vector<int32_t>& tokens() const { return token_ids_; }

 private:
  int32_t size_ = 0;
  std::vector<std::string> bytes_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> token_ids_;
};

// A vocabulary-sized bit set: bit id set = token id allowed.
using TokenMask = std::vector<uint64_t>;

inline bool mask_test(const TokenMask& m, int32_t id) {
  return (m[static_cast<size_t>(id) >> 6] >> (static_cast<uint32_t>(id) & 63)) & 1;
}

// Fills `mask` (resized to the vocabulary) with the tokens whose bytes can
// follow `matcher`'s current state (from its cache when this state was
// masked before); leaves the matcher's state as it was. A step that would
// need more than 64k matcher states (a pathological grammar: each costs a
// 1 KiB row) stops early, leaving the tokens it did not reach out.
void compute_token_mask(Matcher& matcher, const TokenVocabulary& vocab, TokenMask* mask);

}  // namespace loragate::grammar
