// One-pass reader for tokenizer.json. The two big members, model.vocab and
// model.merges (90% of an 11 MB file), are streamed into flat vectors instead
// of a JSON tree, which halves load time; everything else becomes a tree.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "tokenizer/json_util.h"

namespace loragate::tok {

// model.vocab and model.merges as read from the file.
struct BpeTables {
  bool has_vocab = false;   // model.vocab was an object
  bool has_merges = false;  // model.merges was an array
  std::vector<std::pair<std::string, int64_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  std::string error;  // "<key>: <what>" of the first malformed entry, or ""
};

struct TokenizerFile {
  Json root;  // the file without model.vocab / model.merges when those were streamed
  BpeTables tables;
};

// Parses `text` (the contents of `path`, which only names it in errors).
Result<TokenizerFile> read_tokenizer_json(const std::string& text, const std::string& path);

}  // namespace loragate::tok
