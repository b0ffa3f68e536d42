// A Hugging Face Llama model directory written as a GGUF file llama.cpp's
// "llama" architecture loads: the hyper-parameters as llama.* metadata, a
// placeholder tokenizer, and every tensor under llama.cpp's name.
//
// It exists for `bench decode --compare-llamacpp`: llama.cpp then runs on
// exactly the weights loragate runs on. The tokenizer is a stand-in
// (<unk>, <s>, </s>, the 256 byte tokens, then "tok_N" up to vocab_size):
// llama-bench feeds random token ids, so no text is ever tokenised.
#pragma once

#include <string>

#include "bench/ggml_blocks.h"
#include "common/status.h"

namespace loragate::bench {

// Reads `model_dir` (config.json + safetensors) and writes `out_path`, the
// weight matrices and the embedding table as `matrix_type`, the norms in F32.
// Refuses, naming why: a config that is not a Llama-family model without
// attention biases, a tensor that is missing or not float, and a block type
// for a model whose hidden or intermediate size is not a multiple of 32.
Status write_llama_gguf(const std::string& model_dir, GgmlType matrix_type, const std::string& out_path);

// llama.cpp's convert_hf_to_gguf permutes q and k rows: Hugging Face rotates
// dimension i of a head with i + head_dim/2 (rotate_half), llama.cpp's "llama"
// rope rotates 2i with 2i + 1. Row h*head_dim + 2i + j of the GGUF matrix
// (j in {0, 1}) is then row h*head_dim + j*head_dim/2 + i of the HF one; this
// returns that HF row for GGUF row `row`.
int64_t hf_row_of_gguf_rope_row(int64_t row, int64_t head_dim);

// The GGUF file type (general.file_type, llama.cpp's enum llama_ftype) of a
// file whose matrices are `matrix_type`.
uint32_t llama_file_type(GgmlType matrix_type);

}  // namespace loragate::bench
