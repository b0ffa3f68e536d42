#include "kernels/cpu/quantize.h"

#include <algorithm>
#include <cmath>

#include "common/dtype.h"

namespace loragate::cpu {
namespace {

constexpr float kF16Max = 65504.0f;

// int8: symmetric per row, q = round(w / s) with s = max |w| / 127.
void quantize_int8(const float* w, int64_t cols, QuantizedRow& out) {
  float amax = 0;
  for (int64_t k = 0; k < cols; ++k) amax = std::max(amax, std::fabs(w[k]));
  out.scale = amax / 127.0f;
  for (int64_t k = 0; k < cols; ++k) {
    const float q = out.scale > 0 ? std::clamp(std::nearbyint(w[k] / out.scale), -127.0f, 127.0f) : 0.0f;
    out.levels[static_cast<size_t>(k)] = static_cast<uint8_t>(static_cast<int8_t>(q));
  }
}

// int4: per group, the f16 scale (and minimum), then u = round((w - min) / s)
// computed with the stored, f16-rounded values, so that dequantising gives
// the nearest level.
void quantize_int4(WeightType t, const float* w, int64_t cols, QuantizedRow& out) {
  const int64_t group = int4_group(t);
  const bool asym = int4_asymmetric(t);
  for (int64_t g0 = 0, g = 0; g0 < cols; g0 += group, ++g) {
    const int64_t g1 = std::min(cols, g0 + group);
    float scale, minimum;
    if (asym) {
      float lo = w[g0], hi = w[g0];
      for (int64_t k = g0; k < g1; ++k) lo = std::min(lo, w[k]), hi = std::max(hi, w[k]);
      out.group_scales[static_cast<size_t>(g)] = f32_to_f16(std::min((hi - lo) / 15.0f, kF16Max));
      out.group_mins[static_cast<size_t>(g)] = f32_to_f16(std::clamp(lo, -kF16Max, kF16Max));
      scale = f16_to_f32(out.group_scales[static_cast<size_t>(g)]);
      minimum = f16_to_f32(out.group_mins[static_cast<size_t>(g)]);
    } else {
      float amax = 0;
      for (int64_t k = g0; k < g1; ++k) amax = std::max(amax, std::fabs(w[k]));
      out.group_scales[static_cast<size_t>(g)] = f32_to_f16(std::min(amax / 7.0f, kF16Max));
      scale = f16_to_f32(out.group_scales[static_cast<size_t>(g)]);
      minimum = -8.0f * scale;
    }
    for (int64_t k = g0; k < g1; ++k) {
      const float u = scale > 0 ? std::clamp(std::nearbyint((w[k] - minimum) / scale), 0.0f, 15.0f)
                                : (asym ? 0.0f : 8.0f);
      out.levels[static_cast<size_t>(k)] = static_cast<uint8_t>(u);
    }
  }
}

}  // namespace

void quantize_row(WeightType t, const float* w, int64_t cols, QuantizedRow& out) {
  out.levels.resize(static_cast<size_t>(cols));
  if (is_int8(t)) {
    out.group_scales.clear();
    out.group_mins.clear();
    quantize_int8(w, cols, out);
    return;
  }
  const int64_t group = int4_group(t);
  const size_t groups = static_cast<size_t>((cols + group - 1) / group);
  out.scale = 0;
  out.group_scales.resize(groups);
  out.group_mins.resize(int4_asymmetric(t) ? groups : 0);
  quantize_int4(t, w, cols, out);
}

}  // namespace loragate::cpu
