// Helpers the safetensors reader and writer share; not part of the API.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace loragate::safetensors_detail {

// strerror(err) as a string.
std::string errno_text(int err);
// "[2,3]".
std::string shape_string(const std::vector<int64_t>& shape);
// numel × element size into `out`, or false on overflow / negative dims.
bool checked_nbytes(const std::vector<int64_t>& shape, DType dtype, uint64_t* out);

}  // namespace loragate::safetensors_detail
