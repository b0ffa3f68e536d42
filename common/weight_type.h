// WeightType: how a base's weight matrices are stored in memory, chosen by
// `model.dtype` / `--dtype`. Independent of the dtype of the tensors in the
// file (DType): any of them is converted, or quantised, at load.
//
//  - f32, bf16: floats (bf16 rounds to nearest even).
//  - int8: symmetric per output channel, q in [-127, 127], one f32 scale per
//    output row: w = q * s.
//  - int4 (group 32), int4-g64: group-wise along K, q in [-8, 7] with one f16
//    scale per (row, group): w = s * q. The last group of a row whose K is
//    not a multiple of the group is shorter.
//  - int4-asym, int4-asym-g64: the same with an f16 minimum per group too,
//    u in [0, 15]: w = s * u + min.
//  - int8-outlier: int8 weights as int8, multiplied LLM.int8()-style: each
//    activation row is quantised to int8 but for its outlier columns (|x| >
//    a threshold, default 6), which run in f32 (kernels/cpu/int8_matmul.h).
//
// Quantised products are integer dot products: int8 multiplies by each
// activation row quantised to int8 (one scale per row: W8A8), int4 by the
// activations quantised to int8 per block of 32 (W4A8); kernels/cpu/matmul.h.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "common/status.h"

namespace loragate {

// int8-outlier: activations above this magnitude run in f32 (LLM.int8()'s default).
inline constexpr float kDefaultOutlierThreshold = 6.0f;

enum class WeightType { kF32, kBF16, kInt8, kInt8Outlier, kInt4, kInt4G64, kInt4Asym, kInt4AsymG64 };

// The spelling used by config, flags, the admin API and the registry.
std::string_view weight_type_name(WeightType t);
// Parses a name of weight_type_name(); anything else is refused, listing the valid names.
Result<WeightType> parse_weight_type(std::string_view name);
// Every type, in the order of the list in errors and docs.
const std::initializer_list<WeightType>& all_weight_types();

inline bool is_int4(WeightType t) {
  return t == WeightType::kInt4 || t == WeightType::kInt4G64 || t == WeightType::kInt4Asym ||
         t == WeightType::kInt4AsymG64;
}
// int8 weights, dequantised (int8) or multiplied as integers (int8-outlier).
inline bool is_int8(WeightType t) { return t == WeightType::kInt8 || t == WeightType::kInt8Outlier; }
inline bool is_quantized(WeightType t) { return is_int8(t) || is_int4(t); }
// int4: weights per group along K (32 or 64); 0 otherwise.
inline int int4_group(WeightType t) {
  if (t == WeightType::kInt4 || t == WeightType::kInt4Asym) return 32;
  if (t == WeightType::kInt4G64 || t == WeightType::kInt4AsymG64) return 64;
  return 0;
}
inline bool int4_asymmetric(WeightType t) { return t == WeightType::kInt4Asym || t == WeightType::kInt4AsymG64; }

}  // namespace loragate
