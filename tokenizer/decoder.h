// Decoders of tokenizer.json ("decoder"): turn the token strings of an id
// sequence back into text, as HF's Decoder::decode_chain.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "tokenizer/json_util.h"

namespace loragate::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the list of token strings; the final text is their concatenation.
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
  // Rewrites one token string into the raw bytes it adds mid-text: no
  // start-of-text stripping and no lossy UTF-8 repair (a token may hold part
  // of a character). Grammar masks match these bytes.
  virtual void token_bytes(std::string& token) const = 0;
};

// Supported: Sequence, Replace, ByteFallback, Fuse, Strip, ByteLevel, Metaspace,
// BPEDecoder. Others give Status::unsupported naming the type.
Result<std::unique_ptr<Decoder>> make_decoder(const Json& j, const std::string& where);

}  // namespace loragate::tok
