// Parses the --dtype flag of commands that write tensors (synth-model):
// the dtype of a file, f32 or bf16. Weight storage in memory is a WeightType
// (common/weight_type.h, parse_weight_type).
#pragma once

#include <string>

#include "common/dtype.h"
#include "common/status.h"

namespace loragate::cli {

inline Result<DType> parse_file_dtype(const std::string& s) {
  if (s == "f32") return DType::kF32;
  if (s == "bf16") return DType::kBF16;
  return Status::invalid_argument("--dtype must be f32 or bf16, got '" + s + "'");
}

}  // namespace loragate::cli
