// The reference lanes: 16 floats in an array, every operation one loop of
// scalar IEEE operations (std::fma where the vector lanes fuse), so this path
// gives the bits the AVX2 and AVX-512 paths give, on any CPU.
#include <bit>
#include <cmath>
#include <cstring>

#define LG_LANES_TARGET
#include "kernels/cpu/lane_kernels.h"

namespace loragate::cpu::detail {
namespace {

struct ScalarLanes {
  struct F {
    float v[kLanes];
  };
  struct I {
    int32_t v[kLanes];
  };
  struct M {
    bool v[kLanes];
  };

  template <class Out, class Op>
  static Out per_lane(Op op) {
    Out r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = op(l);
    return r;
  }

  // Products stay rounded even in a build that enables FMA everywhere: C++
  // lets GCC fuse a product into the add that follows it (its C++ default is
  // -ffp-contract=fast), and the vector lanes never fuse one unasked.
  static float as_rounded(float v) {
    asm("" : "+x"(v));
    return v;
  }

  static F zero() { return set(0.0f); }
  static F set(float x) { return per_lane<F>([&](int) { return x; }); }
  static I set_i(int32_t k) { return per_lane<I>([&](int) { return k; }); }
  static I iota() { return per_lane<I>([](int l) { return static_cast<int32_t>(l); }); }

  static F load(const float* p) { return load_first(p, kLanes); }
  static void store(float* p, F v) { store_first(p, v, kLanes); }
  static F load_first(const float* p, int n) {
    F r = zero();
    std::memcpy(r.v, p, static_cast<size_t>(n) * sizeof(float));
    return r;
  }
  static void store_first(float* p, F v, int n) { std::memcpy(p, v.v, static_cast<size_t>(n) * sizeof(float)); }
  static void store_i(int32_t* p, I v) { std::memcpy(p, v.v, sizeof v.v); }

  static F add(F a, F b) { return per_lane<F>([&](int l) { return a.v[l] + b.v[l]; }); }
  static F sub(F a, F b) { return per_lane<F>([&](int l) { return a.v[l] - b.v[l]; }); }
  static F mul(F a, F b) { return per_lane<F>([&](int l) { return as_rounded(a.v[l] * b.v[l]); }); }
  static F div(F a, F b) { return per_lane<F>([&](int l) { return a.v[l] / b.v[l]; }); }
  static F fma(F a, F b, F c) { return per_lane<F>([&](int l) { return std::fma(a.v[l], b.v[l], c.v[l]); }); }
  static F min(F a, F b) { return per_lane<F>([&](int l) { return a.v[l] < b.v[l] ? a.v[l] : b.v[l]; }); }
  static F max(F a, F b) { return per_lane<F>([&](int l) { return a.v[l] > b.v[l] ? a.v[l] : b.v[l]; }); }

  static M greater(F a, F b) { return per_lane<M>([&](int l) { return a.v[l] > b.v[l]; }); }
  static M first(int n) { return per_lane<M>([&](int l) { return l < n; }); }
  static F select(M m, F a, F b) { return per_lane<F>([&](int l) { return m.v[l] ? a.v[l] : b.v[l]; }); }
  static I select_i(M m, I a, I b) { return per_lane<I>([&](int l) { return m.v[l] ? a.v[l] : b.v[l]; }); }

  // Integer lanes wrap like the vector ones: the arithmetic is done unsigned.
  static I bits(F a) { return per_lane<I>([&](int l) { return std::bit_cast<int32_t>(a.v[l]); }); }
  static I add_i(I a, I b) { return per_lane<I>([&](int l) { return wrap(uint32_t(a.v[l]) + uint32_t(b.v[l])); }); }
  static I sub_i(I a, I b) { return per_lane<I>([&](int l) { return wrap(uint32_t(a.v[l]) - uint32_t(b.v[l])); }); }
  static I half_i(I a) { return per_lane<I>([&](int l) { return a.v[l] >> 1; }); }
  static F pow2(I k) {
    return per_lane<F>([&](int l) { return std::bit_cast<float>((uint32_t(k.v[l]) + 127u) << 23); });
  }
  static int32_t wrap(uint32_t u) { return std::bit_cast<int32_t>(u); }

  static float sum(F a) {
    for (int width = kLanes / 2; width >= 1; width /= 2) {
      for (int l = 0; l < width; ++l) a.v[l] = a.v[l] + a.v[l + width];
    }
    return a.v[0];
  }
  static float max_lane(F a) {
    for (int width = kLanes / 2; width >= 1; width /= 2) {
      for (int l = 0; l < width; ++l) a.v[l] = a.v[l] > a.v[l + width] ? a.v[l] : a.v[l + width];
    }
    return a.v[0];
  }
};

}  // namespace

const CpuOps& scalar_ops() {
  static const CpuOps ops = make_cpu_ops<ScalarLanes>();
  return ops;
}

}  // namespace loragate::cpu::detail
