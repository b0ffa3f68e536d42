// Deterministic random numbers, the same on every platform: splitmix64 for
// seeding, xoshiro256** for the stream, Box-Muller for normals. Used where a
// seed must reproduce results exactly (sampling, synthetic models and
// adapters); std:: distributions are implementation-defined, so not used.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string_view>

namespace loragate {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// FNV-1a: a stable hash to derive per-name seeds.
inline uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) {
    for (uint64_t& w : s_) w = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = std::rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_[4];
};

// Standard normal draws (Box-Muller, both values used).
class NormalGen {
 public:
  explicit NormalGen(uint64_t seed) : rng_(seed) {}
  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = static_cast<double>((rng_.next() >> 11) + 1) * 0x1.0p-53;  // (0, 1]
    const double u2 = rng_.uniform();                                            // [0, 1)
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double theta = 2.0 * std::numbers::pi * u2;
    spare_ = r * std::sin(theta);
    has_spare_ = true;
    return r * std::cos(theta);
  }

 private:
  Xoshiro256 rng_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace loragate
