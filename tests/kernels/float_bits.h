// Float constants and the bit-exact comparison the kernel tests share.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace loragate::cpu::detail {

inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Equal bits, or both NaN (a NaN's payload is not part of any contract).
inline bool same(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) || (std::isnan(a) && std::isnan(b));
}

}  // namespace loragate::cpu::detail
