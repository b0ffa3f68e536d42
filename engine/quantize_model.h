// `loragate quantize`: writes a model directory whose weights are quantised
// already (the format of engine/quantized_file.h), so that a quantised
// candidate base loads without quantising and has its own sha256 identity.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "common/weight_type.h"

namespace loragate {

struct QuantizeResult {
  std::string weights_path;    // out_dir/model.safetensors
  std::string sha256;          // of that file: the quantised base's identity
  std::string source_sha256;   // of the weights it was made from (also in its metadata)
  uint64_t bytes = 0;          // of that file
  uint64_t source_bytes = 0;   // of the source's weight files
};

// Quantises the float weights of the model in `src_dir` to `type` (int8 or
// an int4 type) into the new directory `out_dir`, with config.json and the
// tokenizer files copied. The directory appears whole or not at all (it is
// written beside and renamed). Refuses a source already quantised, an
// `out_dir` that exists and is not empty, and a type that is not a file type.
Result<QuantizeResult> quantize_model(const std::string& src_dir, const std::string& out_dir, WeightType type);

}  // namespace loragate
