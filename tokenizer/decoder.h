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
};

// Supported: Sequence, Replace, ByteFallback, Fuse, Strip, ByteLevel, Metaspace,
// BPEDecoder. Others give Status::unsupported naming the type.
Result<std::unique_ptr<Decoder>> make_decoder(const Json& j, const std::string& where);

}  // namespace loragate::tok
