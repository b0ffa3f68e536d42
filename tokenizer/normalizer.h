// Normalizers of tokenizer.json ("normalizer"): string -> string rewrites that
// run on each text segment between added tokens, before pre-tokenisation.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "tokenizer/json_util.h"
#include "tokenizer/regex.h"

namespace loragate::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites `text` (valid UTF-8) in place.
  virtual void normalize(std::string& text) const = 0;
};

// Builds the normaliser described by `j`; `where` names file and key for errors.
// Supported: Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD, Lowercase, Strip,
// StripAccents. Others give Status::unsupported naming the type.
Result<std::unique_ptr<Normalizer>> make_normalizer(const Json& j, const std::string& where);

// A {"String": s} or {"Regex": r} pattern, as Replace and Split use (shared by
// the normaliser, pre-tokeniser and decoder builders).
Result<std::shared_ptr<const Regex>> make_pattern(const Json& j, const std::string& where);

}  // namespace loragate::tok
