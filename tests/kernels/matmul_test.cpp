// CPU matmul: accuracy against a double-precision reference, batch
// invariance (bit-identical rows whatever the batch and thread count), and
// bit-equality of the scalar, AVX2 and AVX-512 paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "common/weight_type.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/thread_pool.h"

namespace loragate::cpu {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& f : v) f = d(rng);
  return v;
}

// Source bytes of W in `dt`, and the f32 weights the kernels should see after
// storing in `storage` (rounded through the source type, then bf16 if asked).
struct Weights {
  std::vector<uint16_t> half;
  std::vector<float> f32;      // when the source is f32
  std::vector<float> effective;
  const void* src(DType dt) const { return dt == DType::kF32 ? static_cast<const void*>(f32.data()) : half.data(); }
};

Weights make_weights(int64_t n, int64_t k, DType dt, WeightType storage, uint32_t seed) {
  Weights w;
  const auto v = random_floats(static_cast<size_t>(n * k), seed);
  w.effective.resize(v.size());
  if (dt == DType::kF32) w.f32 = v;
  else w.half.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    float e = v[i];
    if (dt == DType::kF16) w.half[i] = f32_to_f16(v[i]), e = f16_to_f32(w.half[i]);
    if (dt == DType::kBF16) w.half[i] = f32_to_bf16(v[i]), e = bf16_to_f32(w.half[i]);
    if (storage == WeightType::kBF16) e = bf16_to_f32(f32_to_bf16(e));
    w.effective[i] = e;
  }
  return w;
}

constexpr float kSentinel = -12345.f;

// Runs one shape on every ISA: checks the best ISA against the reference,
// that nothing outside [M, N] of y is written, and that other ISAs match bit
// for bit (the scalar one only on smaller shapes: it is slow).
void check_shape(int64_t m, int64_t n, int64_t k, DType dt, WeightType storage) {
  SCOPED_TRACE(::testing::Message() << "M=" << m << " N=" << n << " K=" << k << " src=" << dtype_name(dt)
                                    << " storage=" << weight_type_name(storage));
  const int64_t ldx = k + 3, ldy = n + 5;
  const Weights w = make_weights(n, k, dt, storage, static_cast<uint32_t>(m * 131 + n * 7 + k));
  const PackedMatrix pm = PackedMatrix::pack(w.src(dt), dt, n, k, storage);
  const auto x = random_floats(static_cast<size_t>(m * ldx), static_cast<uint32_t>(k * 17 + m));

  std::vector<float> y(static_cast<size_t>(m * ldy + 7), kSentinel);
  matmul(x.data(), m, ldx, pm, y.data(), ldy);

  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (int64_t c = 0; c < k; ++c) {
        const double p = static_cast<double>(x[static_cast<size_t>(i * ldx + c)]) * w.effective[static_cast<size_t>(j * k + c)];
        ref += p;
        mag += std::fabs(p);
      }
      // Sequential f32 accumulation: |error| <= ~K * 2^-24 * sum |x w|.
      const double tol = static_cast<double>(k + 2) * 6e-8 * mag + 1e-30;
      const float got = y[static_cast<size_t>(i * ldy + j)];
      ASSERT_NEAR(got, ref, tol) << "at m=" << i << " n=" << j;
    }
    for (int64_t j = n; j < ldy && i * ldy + j < static_cast<int64_t>(y.size()); ++j)
      ASSERT_EQ(y[static_cast<size_t>(i * ldy + j)], kSentinel) << "wrote past N at m=" << i << " col " << j;
  }

  for (Isa isa : supported_isas()) {
    if (isa == best_isa()) continue;
    if (isa == Isa::kScalar && m * n * k > (1 << 21)) continue;
    std::vector<float> y2(y.size(), kSentinel);
    detail::matmul_with(isa, 0, x.data(), m, ldx, pm, y2.data(), ldy);
    ASSERT_EQ(0, std::memcmp(y.data(), y2.data(), y.size() * sizeof(float)))
        << isa_name(isa) << " differs from " << isa_name(best_isa());
  }
}

TEST(CpuMatmul, MatchesReferenceF32Source) {
  for (WeightType storage : {WeightType::kF32, WeightType::kBF16})
    for (int64_t m : {1, 2, 3, 7, 12, 13, 31, 32, 33, 64})
      for (int64_t n : {1, 5, 31, 32, 33, 100, 172, 512})
        for (int64_t k : {1, 3, 8, 64, 65, 172, 768}) check_shape(m, n, k, DType::kF32, storage);
}

TEST(CpuMatmul, MatchesReferenceHalfSources) {
  for (DType dt : {DType::kF16, DType::kBF16})
    for (WeightType storage : {WeightType::kF32, WeightType::kBF16})
      for (int64_t m : {1, 3, 13, 33})
        for (int64_t n : {1, 33, 172})
          for (int64_t k : {1, 65, 768}) check_shape(m, n, k, dt, storage);
}

TEST(CpuMatmul, EmptyKGivesZeros) {
  const PackedMatrix pm = PackedMatrix::pack(nullptr, DType::kF32, 5, 0, WeightType::kF32);
  std::vector<float> y(10, kSentinel);
  const float x = 1.f;
  matmul(&x, 2, 0, pm, y.data(), 5);
  for (float v : y) EXPECT_EQ(v, 0.f);
}

// Every row's output must not depend on the batch around it: compare rows of
// a 37-row batch with the row alone, with every prefix batch (all tile
// heights and tails), with a shuffled batch, and across thread counts.
void check_batch_invariance(WeightType storage, int64_t n, int64_t k) {
  SCOPED_TRACE(::testing::Message() << "storage=" << weight_type_name(storage) << " N=" << n << " K=" << k);
  constexpr int64_t kM = 37;
  const Weights w = make_weights(n, k, DType::kF32, storage, 99);
  const PackedMatrix pm = PackedMatrix::pack(w.f32.data(), DType::kF32, n, k, storage);
  // Mixed magnitudes make any change in summation order visible in the bits.
  auto x = random_floats(static_cast<size_t>(kM * k), 5, -1.f, 1.f);
  for (size_t i = 0; i < x.size(); i += 7) x[i] *= 1000.f;

  const Isa best = best_isa();
  std::vector<float> full(static_cast<size_t>(kM * n));
  detail::matmul_with(best, 2, x.data(), kM, k, pm, full.data(), n);
  auto row = [&](const std::vector<float>& y, int64_t i) { return std::vector<float>(y.begin() + i * n, y.begin() + (i + 1) * n); };

  ThreadPool& pool = compute_pool();
  const int pool_threads = pool.size();
  for (int threads : {1, 2, 3, 5}) {
    std::vector<float> y(static_cast<size_t>(kM * n));
    detail::matmul_with(best, threads, x.data(), kM, k, pm, y.data(), n);
    ASSERT_EQ(y, full) << threads << " thread(s)";
    pool.resize(threads);
    matmul(x.data(), kM, k, pm, y.data(), n);
    ASSERT_EQ(y, full) << "matmul() on a pool of " << threads;
  }
  pool.resize(pool_threads);

  for (int64_t i = 0; i < kM; ++i) {
    std::vector<float> one(static_cast<size_t>(n));
    detail::matmul_with(best, 1, x.data() + i * k, 1, k, pm, one.data(), n);
    ASSERT_EQ(one, row(full, i)) << "row " << i << " alone";
  }
  for (int64_t m = 1; m <= kM; ++m) {
    std::vector<float> y(static_cast<size_t>(m * n));
    matmul(x.data(), m, k, pm, y.data(), n);
    for (int64_t i = 0; i < m; ++i) ASSERT_EQ(row(y, i), row(full, i)) << "row " << i << " in a batch of " << m;
  }

  std::vector<int64_t> perm(kM);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(7));
  std::vector<float> xs(x.size()), ys(full.size());
  for (int64_t i = 0; i < kM; ++i) std::copy_n(x.begin() + perm[i] * k, k, xs.begin() + i * k);
  matmul(xs.data(), kM, k, pm, ys.data(), n);
  for (int64_t i = 0; i < kM; ++i) ASSERT_EQ(row(ys, i), row(full, perm[i])) << "row " << perm[i] << " shuffled";
}

TEST(CpuMatmul, BatchInvariantF32) {
  check_batch_invariance(WeightType::kF32, 172, 300);
  check_batch_invariance(WeightType::kF32, 1000, 256);  // large enough to run on 2 threads
}

TEST(CpuMatmul, BatchInvariantBF16) {
  check_batch_invariance(WeightType::kBF16, 172, 300);
  check_batch_invariance(WeightType::kBF16, 1000, 256);
}

TEST(CpuMatmul, BatchInvariantQuantized) {
  for (WeightType storage : {WeightType::kInt8, WeightType::kInt4, WeightType::kInt4AsymG64}) {
    check_batch_invariance(storage, 172, 300);
    check_batch_invariance(storage, 1000, 256);
  }
}

// The scalar fallback and AVX2 must equal the dispatched path bit for bit on
// a batch covering several tiles and a ragged last panel.
TEST(CpuMatmul, AllIsasBitIdentical) {
  for (WeightType storage : {WeightType::kF32, WeightType::kBF16}) {
    const int64_t m = 30, n = 333, k = 257;
    const Weights w = make_weights(n, k, DType::kF32, storage, 3);
    const PackedMatrix pm = PackedMatrix::pack(w.f32.data(), DType::kF32, n, k, storage);
    auto x = random_floats(static_cast<size_t>(m * k), 11);
    for (size_t i = 0; i < x.size(); i += 5) x[i] *= -300.f;
    std::vector<float> ref(static_cast<size_t>(m * n));
    detail::matmul_with(Isa::kScalar, 1, x.data(), m, k, pm, ref.data(), n);
    for (Isa isa : supported_isas()) {
      std::vector<float> y(ref.size());
      detail::matmul_with(isa, 2, x.data(), m, k, pm, y.data(), n);
      EXPECT_EQ(y, ref) << isa_name(isa) << " storage " << weight_type_name(storage);
    }
  }
}


// Every M from 1 to 300 (every tile split each ISA makes, the short tiles
// included), with random N and K that leave ragged panels and odd lengths:
// each ISA's kernels equal the scalar reference bit for bit.
TEST(CpuMatmul, EveryMUpTo300MatchesScalarOnEveryIsa) {
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int64_t> dn(1, 80), dk(1, 48);
  for (int64_t m = 1; m <= 300; ++m) {
    const int64_t n = dn(rng), k = dk(rng);
    const WeightType storage = m % 2 ? WeightType::kF32 : WeightType::kBF16;
    SCOPED_TRACE(::testing::Message() << "M=" << m << " N=" << n << " K=" << k << " " << weight_type_name(storage));
    const Weights w = make_weights(n, k, DType::kF32, storage, static_cast<uint32_t>(m));
    const PackedMatrix pm = PackedMatrix::pack(w.f32.data(), DType::kF32, n, k, storage);
    auto x = random_floats(static_cast<size_t>(m * k), static_cast<uint32_t>(m + 7));
    for (size_t i = 0; i < x.size(); i += 3) x[i] *= 512.f;  // mixed magnitudes expose any reordering
    std::vector<float> ref(static_cast<size_t>(m * n), kSentinel);
    detail::matmul_with(Isa::kScalar, 1, x.data(), m, k, pm, ref.data(), n);
    for (Isa isa : supported_isas()) {
      if (isa == Isa::kScalar) continue;
      std::vector<float> y(ref.size(), kSentinel);
      detail::matmul_with(isa, 2, x.data(), m, k, pm, y.data(), n);
      ASSERT_EQ(0, std::memcmp(y.data(), ref.data(), y.size() * sizeof(float))) << isa_name(isa);
    }
  }
}

TEST(PackedMatrix, AtAndBytes) {
  const int64_t n = 70, k = 45;
  const auto v = random_floats(static_cast<size_t>(n * k), 21);
  std::vector<uint16_t> h(v.size()), b(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_f16(v[i]), b[i] = f32_to_bf16(v[i]);

  const auto f32 = PackedMatrix::pack(v.data(), DType::kF32, n, k, WeightType::kF32);
  const auto bf = PackedMatrix::pack(v.data(), DType::kF32, n, k, WeightType::kBF16);
  const auto from_f16 = PackedMatrix::pack(h.data(), DType::kF16, n, k, WeightType::kF32);
  const auto from_bf16 = PackedMatrix::pack(b.data(), DType::kBF16, n, k, WeightType::kBF16);
  EXPECT_EQ(f32.rows(), n);
  EXPECT_EQ(f32.cols(), k);
  EXPECT_EQ(bf.storage(), WeightType::kBF16);
  const size_t padded = 3 * 32 * k;  // 70 rows -> 3 panels of 32
  EXPECT_EQ(f32.bytes(), padded * 4);
  EXPECT_EQ(bf.bytes(), padded * 2);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f32.data()) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(bf.data()) % 64, 0u);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const size_t i = static_cast<size_t>(r * k + c);
      ASSERT_EQ(f32.at(r, c), v[i]);
      ASSERT_EQ(bf.at(r, c), bf16_to_f32(b[i]));
      ASSERT_EQ(from_f16.at(r, c), f16_to_f32(h[i]));
      ASSERT_EQ(from_bf16.at(r, c), bf16_to_f32(b[i]));
    }
  EXPECT_TRUE(PackedMatrix().empty());
}

}  // namespace
}  // namespace loragate::cpu
