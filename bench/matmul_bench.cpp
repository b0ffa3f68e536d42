#include "bench/matmul_bench.h"

#include <cstdio>
#include <map>
#include <random>
#include <thread>
#include <utility>

#include "bench/bench_util.h"
#include "bench/roofline.h"
#include "kernels/cpu/int8_matmul.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul.h"

namespace loragate::bench {
namespace {

// The product the engine runs for `w`: W8A8 for int8-outlier storage (x
// holds no outlier), the dequantising matmul otherwise.
void product(const std::vector<float>& x, int64_t m, const cpu::PackedMatrix& w, std::vector<float>& y) {
  if (w.storage() == WeightType::kInt8Outlier) {
    cpu::matmul_int8_outlier(x.data(), m, w.cols(), w, 6.0f, y.data(), w.rows());
  } else {
    cpu::matmul(x.data(), m, w.cols(), w, y.data(), w.rows());
  }
}

// Seconds per call, timed over enough calls to last ~40 ms.
double seconds_per_call(const std::vector<float>& x, int64_t m, const cpu::PackedMatrix& w, std::vector<float>& y) {
  product(x, m, w, y);  // warm the caches and the threads
  int calls = 0;
  const auto t0 = BenchClock::now();
  double elapsed = 0;
  do {
    product(x, m, w, y);
    ++calls;
    elapsed = seconds_since(t0);
  } while (elapsed < 0.04);
  return elapsed / calls;
}

}  // namespace

Status run_matmul_bench(const MatmulBenchOptions& o) {
  if (o.out <= 0 || o.in <= 0) return Status::invalid_argument("--n and --k must be > 0");
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int64_t max_m = 1;
  for (int64_t m : o.rows) {
    if (m <= 0) return Status::invalid_argument("--m values must be > 0");
    max_m = std::max(max_m, m);
  }
  std::vector<std::pair<std::string, cpu::PackedMatrix>> weights;
  {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    std::vector<float> src(static_cast<size_t>(o.out * o.in));
    for (float& v : src) v = d(rng);
    for (const std::string& name : o.dtypes) {
      LG_ASSIGN_OR_RETURN(const WeightType storage, parse_weight_type(name));
      weights.emplace_back(name, cpu::PackedMatrix::pack(src.data(), DType::kF32, o.out, o.in, storage));
    }
  }
  std::vector<float> x(static_cast<size_t>(max_m * o.in), 0.5f), y(static_cast<size_t>(max_m * o.out));

  std::printf("loragate matmul benchmark: N %lld, K %lld, %d reps, %d threads, kernels %s\n",
              static_cast<long long>(o.out), static_cast<long long>(o.in), o.reps, threads,
              cpu::isa_name(cpu::best_isa()));
  std::vector<double> peaks, triads;
  std::map<std::pair<std::string, int64_t>, std::vector<double>> gflops;
  for (int rep = 0; rep < o.reps; ++rep) {
    peaks.push_back(measure_peak_fma_gflops(threads, 1));
    triads.push_back(measure_triad_gbps(threads, 1));
    for (const auto& [name, w] : weights) {
      for (int64_t m : o.rows) {
        const double s = seconds_per_call(x, m, w, y);
        gflops[{name, m}].push_back(2.0 * static_cast<double>(m * o.out * o.in) / s * 1e-9);
      }
    }
  }
  const double peak = median(peaks), triad = median(triads);
  std::printf("machine (medians of %d, measured between the runs): triad %.1f GB/s, peak f32 FMA %.1f GFLOP/s (%s)\n\n",
              o.reps, triad, peak, cpu::isa_name(cpu::best_isa()));
  std::printf("dtype           M      GFLOP/s   of FMA peak   weights GB/s   of triad\n");
  for (const auto& [name, w] : weights) {
    for (int64_t m : o.rows) {
      const double g = median(gflops[{name, m}]);
      const double seconds = 2.0 * static_cast<double>(m * o.out * o.in) / (g * 1e9);
      const double gbps = static_cast<double>(w.bytes()) / seconds * 1e-9;
      std::printf("%-13s %4lld %12.1f %12.1f%% %14.1f %9.1f%%\n", name.c_str(), static_cast<long long>(m), g,
                  100.0 * g / peak, gbps, 100.0 * gbps / triad);
    }
  }
  return Status::ok();
}

}  // namespace loragate::bench
