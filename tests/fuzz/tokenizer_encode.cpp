// Encoding and decoding arbitrary text with real tokenizers: stories260K
// (SentencePiece style, byte fallback), Mistral 7B (SentencePiece) and Qwen3
// (byte-level BPE, NFC, Split regex) from ../shared, or the small committed
// seeds of fuzz_tokenizer_json where ../shared is absent
// ($LORAGATE_FUZZ_TOKENIZERS, colon-separated tokenizer.json paths, overrides
// both). Encodes, decodes the ids back (whole and incrementally, as streaming
// does), and decodes ids taken from the raw bytes, out-of-range ones included:
// /v1/completions with echo decodes the client's prompt ids.
//
// Input: byte 0 picks the tokenizer and the special-token flags; the rest is text.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "fuzz_util.h"

namespace {

using namespace loragate;

// Never destroyed: the tokenizers stay reachable (no leak report) until exit.
std::vector<const Tokenizer*>& tokenizers = *new std::vector<const Tokenizer*>;

std::vector<std::string> tokenizer_paths() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("LORAGATE_FUZZ_TOKENIZERS"); env != nullptr && *env != '\0') {
    std::string list = env;
    for (size_t start = 0; start <= list.size();) {
      const size_t colon = std::min(list.find(':', start), list.size());
      if (colon > start) paths.push_back(list.substr(start, colon - start));
      start = colon + 1;
    }
    return paths;
  }
  const std::string shared = fuzz::shared_dir();
  for (const char* p : {"/models/stories260K", "/tokenizers/mistral7b", "/tokenizers/qwen3"}) {
    if (fuzz::file_exists(shared + p + "/tokenizer.json")) paths.push_back(shared + p + "/tokenizer.json");
  }
  if (paths.empty()) {
    std::fprintf(stderr, "fuzz_tokenizer_encode: %s is absent; using the committed seed tokenizers\n", shared.c_str());
    const std::string seeds = std::string(LORAGATE_FUZZ_SEEDS_DIR) + "/tokenizer_json/";
    for (const char* p : {"sentencepiece.json", "bytelevel.json"}) paths.push_back(seeds + p);
  }
  return paths;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  for (const std::string& path : tokenizer_paths()) {
    auto loaded = Tokenizer::load_files(path, "");
    if (!loaded.is_ok()) {
      std::fprintf(stderr, "fuzz_tokenizer_encode: %s\n", loaded.status().message().c_str());
      std::abort();
    }
    tokenizers.push_back(std::move(loaded).value().release());
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  const Tokenizer& tok = *tokenizers[(control & 0x0f) % tokenizers.size()];
  const bool add_special = control & 0x10;
  const bool skip_special = control & 0x20;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);

  const std::vector<int32_t> ids = tok.encode(text, add_special);
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.vocab_size()) __builtin_trap();  // encode gives valid ids only
  }
  const std::string decoded = tok.decode(ids, skip_special);
  IncrementalDecoder stream(tok, {}, skip_special);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();

  // Ids from the raw bytes (4 at a time), in and out of range.
  std::vector<int32_t> raw(text.size() / 4);
  if (!raw.empty()) std::memcpy(raw.data(), text.data(), raw.size() * 4);
  (void)tok.decode(raw, skip_special);
  for (int32_t id : raw) {
    (void)tok.id_to_token(id);
    (void)tok.is_special(id);
  }
  (void)tok.token_to_id(text);
  return 0;
}
