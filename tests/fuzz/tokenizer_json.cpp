// Loading tokenizer.json (and tokenizer_config.json): the tokenizer's own JSON
// reader, the model (BPE vocab, merges, byte fallback), normalizers,
// pre-tokenizers (Split regexes compiled with PCRE2), post-processor,
// decoders and added tokens. A file that loads then encodes and decodes a
// fixed multilingual text, and decodes every id up to 512.
//
// Input: "<tokenizer.json>" or "<tokenizer.json>\0<tokenizer_config.json>".
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "fuzz_util.h"

using namespace loragate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::ScratchFile json_file("tokenizer.json");
  static fuzz::ScratchFile config_file("tokenizer_config.json");
  const auto [json, config] = fuzz::split_at_nul(std::string_view(reinterpret_cast<const char*>(data), size));
  json_file.write(json);
  const bool has_config = json.size() < size;
  if (has_config) config_file.write(config);
  auto loaded = Tokenizer::load_files(json_file.path(), has_config ? config_file.path() : "");
  if (!loaded.is_ok()) return 0;
  const Tokenizer& tok = *loaded.value();

  static const char* kText = "Hello, world! <s>Once upon a time</s> 123 \xc3\xa9t\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac "
                             "\xf0\x9f\x98\x80\t\n  x";
  for (bool special : {false, true}) {
    const std::vector<int32_t> ids = tok.encode(kText, special);
    for (int32_t id : ids) {
      if (id < 0 || id >= tok.vocab_size()) __builtin_trap();  // encode gives valid ids only
    }
    (void)tok.decode(ids, special);
  }
  std::vector<int32_t> all;
  for (int32_t id = -1; id < std::min(tok.vocab_size() + 1, 512); ++id) all.push_back(id);
  (void)tok.decode(all, false);
  IncrementalDecoder stream(tok, {}, false);
  for (int32_t id : all) (void)stream.push(id);
  (void)stream.flush();
  (void)tok.bos_id();
  (void)tok.eos_id();
  return 0;
}
