// Machine probes: STREAM-triad bandwidth and peak FMA throughput, measured
// with the same thread count as the benchmark they put in context.
#include "bench/roofline.h"

#include <immintrin.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "bench/bench_util.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/thread_pool.h"

namespace loragate::bench {
namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ---- Triad ------------------------------------------------------------------

// Streaming (non-temporal) stores: a plain store first reads the line it
// overwrites (write-allocate), traffic the 3-array byte count ignores, which
// would understate the bandwidth by a quarter. Streaming stores make the
// count true (as vendor-built STREAM does). n and the pointers are multiples
// of 16 floats / 64 bytes.
__attribute__((target("avx512f"))) void triad_avx512(float* a, const float* b, const float* c, float s, size_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  for (size_t i = 0; i < n; i += 16)
    _mm512_stream_ps(a + i, _mm512_fmadd_ps(vs, _mm512_load_ps(c + i), _mm512_load_ps(b + i)));
  _mm_sfence();
}

__attribute__((target("avx2,fma"))) void triad_avx2(float* a, const float* b, const float* c, float s, size_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  for (size_t i = 0; i < n; i += 8)
    _mm256_stream_ps(a + i, _mm256_fmadd_ps(vs, _mm256_load_ps(c + i), _mm256_load_ps(b + i)));
  _mm_sfence();
}

void triad_sse(float* a, const float* b, const float* c, float s, size_t n) {
  const __m128 vs = _mm_set1_ps(s);
  for (size_t i = 0; i < n; i += 4) _mm_stream_ps(a + i, _mm_add_ps(_mm_load_ps(b + i), _mm_mul_ps(vs, _mm_load_ps(c + i))));
  _mm_sfence();
}

// Each array must dwarf the last-level cache (server L3s reach hundreds of
// MB), or the triad measures cache, not DRAM.
size_t triad_array_bytes() {
  const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const size_t min_bytes = size_t{64} << 20, max_bytes = size_t{512} << 20;
  const size_t want = llc > 0 ? static_cast<size_t>(llc) : 0;  // 3 arrays = 3x the LLC
  return std::clamp(want, min_bytes, max_bytes);
}

struct AlignedFree {
  void operator()(float* p) const { std::free(p); }
};

}  // namespace

double measure_triad_gbps(int threads, int reps) {
  threads = std::max(threads, 1);
  reps = std::max(reps, 1);
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t bytes = (triad_array_bytes() + kHuge - 1) / kHuge * kHuge;
  const size_t n = bytes / sizeof(float);
  // Huge pages: the streams then cost no TLB misses, only DRAM time.
  auto alloc = [bytes] {
    void* p = std::aligned_alloc(kHuge, bytes);
    if (p == nullptr) throw std::bad_alloc();
    madvise(p, bytes, MADV_HUGEPAGE);
    return std::unique_ptr<float, AlignedFree>(static_cast<float*>(p));
  };
  // The kernels' ISA (LORAGATE_ISA may force a lower one): the roof is what that path can reach.
  const cpu::Isa isa = cpu::best_isa();
  auto* triad = isa == cpu::Isa::kAvx512 ? &triad_avx512 : isa == cpu::Isa::kAvx2 ? &triad_avx2 : &triad_sse;
  auto a = alloc(), b = alloc(), c = alloc();
  float *pa = a.get(), *pb = b.get(), *pc = c.get();
  std::vector<double> times;
  double t0 = 0;
  cpu::compute_pool().run(threads, [&](int thread, int count) {
    // Each thread touches (and so places) the part it will stream.
    const size_t nt = static_cast<size_t>(count), id = static_cast<size_t>(thread);
    const size_t lo = n / 16 * id / nt * 16, hi = n / 16 * (id + 1) / nt * 16;  // 64-byte aligned chunks
    for (size_t i = lo; i < hi; ++i) pa[i] = 0.f, pb[i] = 1.f, pc[i] = 2.f;
    for (int r = 0; r <= reps; ++r) {  // rep 0 warms up
      cpu::ThreadPool::barrier();
      if (thread == 0) t0 = seconds_now();
      triad(pa + lo, pb + lo, pc + lo, 3.f, hi - lo);
      cpu::ThreadPool::barrier();
      if (thread == 0 && r > 0) times.push_back(seconds_now() - t0);
    }
  });
  return 3.0 * static_cast<double>(n * sizeof(float)) / median(times) * 1e-9;
}

// ---- Peak FMA ---------------------------------------------------------------

namespace {

// 12 independent accumulators: enough chains to cover FMA latency (4 cycles)
// on two FMA ports. Returns the sum so the work cannot be elided.
constexpr int kChains = 12;

__attribute__((target("avx512f,fma"))) float fma_loop_avx512(int64_t iters, float seed) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);  // acc -> 1, no denormals
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  float r = 0;
  for (float v : out) r += v;
  return r;
}

__attribute__((target("avx2,fma"))) float fma_loop_avx2(int64_t iters, float seed) {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(seed + static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  alignas(32) float out[8];
  __m256 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, acc[i]);
  _mm256_store_ps(out, s);
  float r = 0;
  for (float v : out) r += v;
  return r;
}

// No FMA unit: SSE multiply + add, counted as one 2-flop "FMA" per lane.
float fma_loop_sse(int64_t iters, float seed) {
  __m128 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm_set1_ps(seed + static_cast<float>(i));
  const __m128 a = _mm_set1_ps(0.999999f), b = _mm_set1_ps(1e-6f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm_add_ps(_mm_mul_ps(acc[i], a), b);
  alignas(16) float out[4];
  __m128 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm_add_ps(s, acc[i]);
  _mm_store_ps(out, s);
  return out[0] + out[1] + out[2] + out[3];
}

}  // namespace

int engine_threads() { return cpu::compute_pool().size(); }

double measure_peak_fma_gflops(int threads, int reps) {
  threads = std::max(threads, 1);
  reps = std::max(reps, 1);
  const cpu::Isa isa = cpu::best_isa();  // as for the triad
  const int lanes = isa == cpu::Isa::kAvx512 ? 16 : isa == cpu::Isa::kAvx2 ? 8 : 4;
  const int64_t iters = int64_t{1} << 22;  // ~50M FMA instructions per thread per rep (tens of ms)
  std::vector<double> times;
  std::vector<float> sink(static_cast<size_t>(threads));  // keeps the loops' results alive
  double t0 = 0;
  int ran = 1;  // threads the pool gave the run (it may have fewer than asked)
  cpu::compute_pool().run(threads, [&](int thread, int count) {
    if (thread == 0) ran = count;
    const float seed = static_cast<float>(thread);
    for (int r = 0; r <= reps; ++r) {  // rep 0 warms up (and lifts the clock)
      cpu::ThreadPool::barrier();
      if (thread == 0) t0 = seconds_now();
      const float v = lanes == 16 ? fma_loop_avx512(iters, seed) : lanes == 8 ? fma_loop_avx2(iters, seed) : fma_loop_sse(iters, seed);
      sink[static_cast<size_t>(thread)] += v;
      cpu::ThreadPool::barrier();
      if (thread == 0 && r > 0) times.push_back(seconds_now() - t0);
    }
  });
  asm volatile("" : : "r"(sink.data()) : "memory");
  const double flops = 2.0 * lanes * kChains * static_cast<double>(iters) * ran;
  return flops / median(times) * 1e-9;
}

}  // namespace loragate::bench
