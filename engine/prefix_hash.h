// The identity of a cached KV block: a SHA-256 chain over the block's token
// ids and its parent's hash, rooted in everything else that changes K/V.
//
// A block's K/V depend on every token before it and on how they were
// computed: the base's weights and storage dtype, the model config (RoPE
// and its scaling, sliding window), the adapter's content (LoRA on q/k/v
// changes K and V; on later layers, the hidden states they read) and the
// tenant's cache_salt. The root hashes all of them, each length-prefixed so
// no two different keys share a byte string, and each block hash covers its
// parent: equal hashes mean equal K/V, so a hit is a copy of a cold run by
// construction. SHA-256 rather than a fast 64-bit hash because a tenant
// chooses the tokens: a collision would serve another tenant's K/V, and a
// found second preimage would let one probe another's prompts.
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace loragate {

struct BlockHash {
  std::array<uint8_t, 32> bytes{};
  bool operator==(const BlockHash&) const = default;
};

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const {
    size_t v;  // already uniform: the first bytes of a SHA-256
    std::memcpy(&v, h.bytes.data(), sizeof v);
    return v;
  }
};

// The engine's part of every root: the weights' sha256, their storage dtype,
// the model config as JSON and the block size (a block's tokens are its key).
std::string prefix_engine_key(std::string_view weights_sha256, std::string_view dtype, std::string_view config_json,
                              int32_t block_size);

// The root of one request's chain. `adapter_identity` is "" for the base alone.
BlockHash prefix_chain_root(std::string_view engine_key, std::string_view adapter_identity, std::string_view cache_salt);

// The hash of a full block of `n` tokens whose parent (the block before, or the root) is `parent`.
BlockHash next_block_hash(const BlockHash& parent, const int32_t* tokens, int64_t n);

}  // namespace loragate
