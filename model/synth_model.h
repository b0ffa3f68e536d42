// Writes seeded random-weight Llama models in Hugging Face layout for tests
// and benchmarks: config.json, model.safetensors, tokenizer.json,
// tokenizer_config.json and generation_config.json.
#pragma once

#include <cstdint>
#include <string>

#include "common/dtype.h"
#include "common/status.h"
#include "model/model_config.h"

namespace loragate {

struct SynthOptions {
  std::string preset = "tiny";  // tiny | 110m | 1b | 8b
  uint64_t seed = 0;
  DType dtype = DType::kF32;     // F32 or BF16 tensors in the file
};

// The shape of a preset. tiny: hidden 64, 2 layers, 4 heads, 2 KV heads,
// intermediate 176, vocab 512. 110m: hidden 768, 12 layers, 12 heads,
// 4 KV heads, intermediate 2048, vocab 32000. 1b: hidden 2048, 16 layers,
// 32 heads, 8 KV heads, intermediate 5632, vocab 32000. 8b (Llama-3-8B
// shapes): hidden 4096, 32 layers, 32 heads, 8 KV heads, intermediate
// 14336, vocab 128256, rope theta 500000.
Result<ModelConfig> synth_preset_config(const std::string& preset);

// Writes the model into `out_dir` (created if needed). Weights are drawn from
// N(0, 0.02) (norms near 1) with a generator seeded by `seed`: the same options
// give byte-identical files. The tokenizer is a SentencePiece-style BPE with
// byte fallback whose vocabulary fills the preset's vocab_size.
Status write_synth_model(const std::string& out_dir, const SynthOptions& options);

// The tokenizer.json text write_synth_model writes for a vocabulary of
// `vocab_size` entries (at least 354: 3 specials, 256 bytes, "▁", 94 ASCII).
Result<std::string> synth_tokenizer_json(int64_t vocab_size);

}  // namespace loragate
