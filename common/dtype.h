// Element types of tensors in files (safetensors) and in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace loragate {

// I8 and U8 hold the integer levels of quantised weights (loragate quantize);
// everything that expects weights as numbers takes only the float types.
enum class DType { kF32, kF16, kBF16, kI8, kU8 };

// Bytes per element.
inline size_t dtype_size(DType t) {
  if (t == DType::kF32) return 4;
  return t == DType::kI8 || t == DType::kU8 ? 1 : 2;
}
inline bool is_float_dtype(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }
// The safetensors spelling: "F32", "F16", "BF16", "I8", "U8".
std::string_view dtype_name(DType t);

// bf16 -> f32 is exact: the bf16 bits are the top half of the f32.
inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// f32 -> bf16 with round-to-nearest-even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// IEEE half -> f32 (exact, handles subnormals, inf and NaN).
float f16_to_f32(uint16_t h);
// f32 -> IEEE half with round-to-nearest-even.
uint16_t f32_to_f16(float f);

// Converts `n` elements of type `src_type` at `src` into f32 at `dst`
// (integer types convert exactly, as their values).
void convert_to_f32(DType src_type, const void* src, float* dst, size_t n);

}  // namespace loragate
