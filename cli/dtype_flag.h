// Parses the --dtype flag shared by several commands.
#pragma once

#include <string>

#include "common/dtype.h"
#include "common/status.h"

namespace loragate::cli {

inline Result<DType> parse_weight_dtype(const std::string& s) {
  if (s == "f32") return DType::kF32;
  if (s == "bf16") return DType::kBF16;
  return Status::invalid_argument("--dtype must be f32 or bf16, got '" + s + "'");
}

}  // namespace loragate::cli
