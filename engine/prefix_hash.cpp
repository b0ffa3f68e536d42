#include "engine/prefix_hash.h"

#include "common/sha256.h"

namespace loragate {
namespace {

// A field as its 8-byte little-endian length and then its bytes.
void add_field(Sha256& h, std::string_view field) {
  uint8_t len[8];
  uint64_t n = field.size();
  for (uint8_t& b : len) {
    b = static_cast<uint8_t>(n);
    n >>= 8;
  }
  h.update(len, sizeof len);
  h.update(field);
}

}  // namespace

std::string prefix_engine_key(std::string_view weights_sha256, std::string_view dtype, std::string_view config_json,
                              int32_t block_size) {
  Sha256 h;
  add_field(h, "loragate-kv-1");
  add_field(h, weights_sha256);
  add_field(h, dtype);
  add_field(h, config_json);
  add_field(h, std::to_string(block_size));
  return h.finish_hex();
}

BlockHash prefix_chain_root(std::string_view engine_key, std::string_view adapter_identity, std::string_view cache_salt) {
  Sha256 h;
  add_field(h, engine_key);
  add_field(h, adapter_identity.empty() ? std::string_view("none") : adapter_identity);
  // An absent salt and an empty one are the same tenant; a present one is its own field.
  add_field(h, cache_salt.empty() ? std::string_view("nosalt") : std::string_view("salt"));
  add_field(h, cache_salt);
  return {h.finish()};
}

BlockHash next_block_hash(const BlockHash& parent, const int32_t* tokens, int64_t n) {
  Sha256 h;
  h.update(parent.bytes.data(), parent.bytes.size());
  uint8_t buf[256];  // 64 tokens at a time, little-endian on every host: the same hash everywhere
  for (int64_t i = 0; i < n;) {
    size_t used = 0;
    for (; i < n && used < sizeof buf; ++i, used += 4) {
      const uint32_t t = static_cast<uint32_t>(tokens[i]);
      buf[used] = static_cast<uint8_t>(t);
      buf[used + 1] = static_cast<uint8_t>(t >> 8);
      buf[used + 2] = static_cast<uint8_t>(t >> 16);
      buf[used + 3] = static_cast<uint8_t>(t >> 24);
    }
    h.update(buf, used);
  }
  return {h.finish()};
}

}  // namespace loragate
