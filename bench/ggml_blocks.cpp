#include "bench/ggml_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/dtype.h"

namespace loragate::bench {
namespace {

constexpr size_t kQ4_0BlockBytes = 2 + kGgmlBlockValues / 2;
constexpr size_t kQ8_0BlockBytes = 2 + kGgmlBlockValues;

float block_abs_max(const float* x) {
  float amax = 0.0f;
  for (int64_t i = 0; i < kGgmlBlockValues; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

// Stores the scale as f16 and returns the f16-rounded value, so that the
// levels are chosen against the scale the reader will use.
float put_scale(float d, uint8_t* out) {
  const uint16_t half = f32_to_f16(d);
  std::memcpy(out, &half, sizeof half);  // little-endian, as on every target we build for
  return f16_to_f32(half);
}

int level(float v, float inv_d, int lo, int hi) {
  return std::clamp(static_cast<int>(std::lround(v * inv_d)), lo, hi);
}

// The scale is amax / 7, not ggml's own choice (the signed extreme / -8):
// every value then lies within half a step of its level, at the cost of
// leaving level -8 unused. Either is a valid Q4_0 block for the reader.
void encode_q4_0_block(const float* x, uint8_t* out) {
  const float d = put_scale(block_abs_max(x) / 7.0f, out);
  const float inv_d = d > 0.0f ? 1.0f / d : 0.0f;
  uint8_t* nibbles = out + 2;
  constexpr int64_t half = kGgmlBlockValues / 2;
  for (int64_t j = 0; j < half; ++j) {
    const int lo = level(x[j], inv_d, -8, 7) + 8;
    const int hi = level(x[j + half], inv_d, -8, 7) + 8;
    nibbles[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void encode_q8_0_block(const float* x, uint8_t* out) {
  const float d = put_scale(block_abs_max(x) / 127.0f, out);
  const float inv_d = d > 0.0f ? 1.0f / d : 0.0f;
  for (int64_t j = 0; j < kGgmlBlockValues; ++j) {
    out[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(level(x[j], inv_d, -127, 127)));
  }
}

}  // namespace

std::string_view ggml_type_name(GgmlType t) {
  switch (t) {
    case GgmlType::kF32: return "F32";
    case GgmlType::kF16: return "F16";
    case GgmlType::kQ4_0: return "Q4_0";
    case GgmlType::kQ8_0: return "Q8_0";
    case GgmlType::kBF16: return "BF16";
  }
  return "?";
}

bool is_block_quantised(GgmlType t) { return t == GgmlType::kQ4_0 || t == GgmlType::kQ8_0; }

size_t ggml_row_bytes(GgmlType t, int64_t n) {
  const size_t count = static_cast<size_t>(n);
  switch (t) {
    case GgmlType::kF32: return count * 4;
    case GgmlType::kF16:
    case GgmlType::kBF16: return count * 2;
    case GgmlType::kQ4_0: return count / kGgmlBlockValues * kQ4_0BlockBytes;
    case GgmlType::kQ8_0: return count / kGgmlBlockValues * kQ8_0BlockBytes;
  }
  return 0;
}

void encode_ggml_row(GgmlType t, const float* x, int64_t n, uint8_t* out) {
  switch (t) {
    case GgmlType::kF32:
      std::memcpy(out, x, static_cast<size_t>(n) * 4);
      return;
    case GgmlType::kF16:
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = t == GgmlType::kF16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case GgmlType::kQ4_0:
      for (int64_t b = 0; b < n / kGgmlBlockValues; ++b) {
        encode_q4_0_block(x + b * kGgmlBlockValues, out + b * kQ4_0BlockBytes);
      }
      return;
    case GgmlType::kQ8_0:
      for (int64_t b = 0; b < n / kGgmlBlockValues; ++b) {
        encode_q8_0_block(x + b * kGgmlBlockValues, out + b * kQ8_0BlockBytes);
      }
      return;
  }
}

}  // namespace loragate::bench
