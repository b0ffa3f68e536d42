#include "common/dtype.h"

namespace loragate {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kI8: return "I8";
    case DType::kU8: return "U8";
  }
  return "?";
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;             // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;            // overflow -> inf
  if (abs < 0x33000001u) return sign;                       // underflow -> 0
  int exp = static_cast<int>(abs >> 23) - 127 + 15;
  uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  int shift = exp <= 0 ? 14 - exp : 13;                     // subnormal halves shift more
  uint32_t half = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
  if (exp <= 0) return static_cast<uint16_t>(sign | half);
  // `half` still holds the implicit bit; a rounding carry moves into the exponent.
  return static_cast<uint16_t>(sign | ((static_cast<uint32_t>(exp) << 10) + half - 0x400u));
}

void convert_to_f32(DType src_type, const void* src, float* dst, size_t n) {
  const auto* u16 = static_cast<const uint16_t*>(src);
  switch (src_type) {
    case DType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::kBF16: for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(u16[i]); return;
    case DType::kF16: for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(u16[i]); return;
    case DType::kI8:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<const int8_t*>(src)[i];
      return;
    case DType::kU8:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<const uint8_t*>(src)[i];
      return;
  }
}

}  // namespace loragate
