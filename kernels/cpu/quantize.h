// Quantising one weight row as common/weight_type.h describes. Shared by
// the packer (quantise at load) and `loragate quantize` (quantise to a
// file), so that a quantised file loads into exactly the packed matrix that
// quantising the original at load gives.
#pragma once

#include <cstdint>
#include <vector>

#include "common/weight_type.h"

namespace loragate::cpu {

// A row's integer levels and scales.
//  - int8: levels are q in [-127, 127] (as two's complement bytes), one f32
//    scale: w = q * scale.
//  - int4: levels are u in [0, 15], one f16 scale per group along K (and,
//    asymmetric, one f16 minimum): w = fma(u, s, min), where a symmetric
//    group's minimum is -8 s (u = q + 8).
struct QuantizedRow {
  std::vector<uint8_t> levels;         // cols
  float scale = 0;                     // int8
  std::vector<uint16_t> group_scales;  // int4: ceil(cols / group), f16 bits
  std::vector<uint16_t> group_mins;    // int4 asymmetric: ceil(cols / group), f16 bits
};

// Quantises the `cols` values of `w` into `out` (resized) for quantised type `t`.
void quantize_row(WeightType t, const float* w, int64_t cols, QuantizedRow& out);

}  // namespace loragate::cpu
