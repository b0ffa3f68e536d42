#include "evaluator/bootstrap.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/random.h"

namespace loragate::eval {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// An index in [0, n): 53 uniform bits scaled down. The bias (n / 2^53) is far
// below anything a bootstrap can resolve, and unlike a std:: distribution the
// mapping is fixed, so draws reproduce across standard libraries.
uint32_t draw_index(Xoshiro256& rng, size_t n) {
  const auto i = static_cast<size_t>(rng.uniform() * static_cast<double>(n));
  return static_cast<uint32_t>(std::min(i, n - 1));
}

void redraw(Xoshiro256& rng, std::vector<uint32_t>& sample, size_t n) {
  for (uint32_t& i : sample) i = draw_index(rng, n);
}

std::vector<uint32_t> every_index(size_t n) {
  assert(n <= std::numeric_limits<uint32_t>::max());
  std::vector<uint32_t> all(n);
  std::iota(all.begin(), all.end(), 0u);
  return all;
}

// The q-quantile of sorted values, linear between the closest ranks.
double sorted_quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return kNaN;
  const double r = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(r));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (r - static_cast<double>(lo));
}

// The percentile interval of the finite resampled values.
Interval percentile_interval(double estimate, std::vector<double>& values, double level) {
  std::sort(values.begin(), values.end());
  const double tail = (1.0 - level) / 2.0;
  return Interval{estimate, sorted_quantile(values, tail), sorted_quantile(values, 1.0 - tail)};
}

}  // namespace

Interval paired_bootstrap(size_t n, const SampleStatistic& statistic, const BootstrapOptions& options) {
  if (n == 0) return Interval{kNaN, kNaN, kNaN};
  const double estimate = statistic(every_index(n));
  Xoshiro256 rng(options.seed);
  std::vector<uint32_t> sample(n);
  std::vector<double> values;
  values.reserve(static_cast<size_t>(std::max(options.samples, 0)));
  for (int32_t b = 0; b < options.samples; ++b) {
    redraw(rng, sample, n);
    const double v = statistic(sample);
    if (std::isfinite(v)) values.push_back(v);
  }
  return percentile_interval(estimate, values, options.level);
}

Interval unpaired_bootstrap(size_t n_a, size_t n_b, const UnpairedStatistic& statistic,
                            const BootstrapOptions& options) {
  if (n_a == 0 || n_b == 0) return Interval{kNaN, kNaN, kNaN};
  const double estimate = statistic(every_index(n_a), every_index(n_b));
  Xoshiro256 rng(options.seed);
  std::vector<uint32_t> sample_a(n_a), sample_b(n_b);
  std::vector<double> values;
  values.reserve(static_cast<size_t>(std::max(options.samples, 0)));
  for (int32_t b = 0; b < options.samples; ++b) {
    redraw(rng, sample_a, n_a);
    redraw(rng, sample_b, n_b);
    const double v = statistic(sample_a, sample_b);
    if (std::isfinite(v)) values.push_back(v);
  }
  return percentile_interval(estimate, values, options.level);
}

double sample_mean(const std::vector<double>& values, const std::vector<uint32_t>& sample) {
  if (sample.empty()) return kNaN;
  double sum = 0;
  for (uint32_t i : sample) sum += values[i];
  return sum / static_cast<double>(sample.size());
}

double sample_ratio(const std::vector<double>& numerator, const std::vector<double>& denominator,
                    const std::vector<uint32_t>& sample) {
  double num = 0, den = 0;
  for (uint32_t i : sample) {
    num += numerator[i];
    den += denominator[i];
  }
  return den == 0 ? kNaN : num / den;
}

double sample_quantile(const std::vector<double>& values, const std::vector<uint32_t>& sample, double q) {
  std::vector<double> picked;
  picked.reserve(sample.size());
  for (uint32_t i : sample) picked.push_back(values[i]);
  std::sort(picked.begin(), picked.end());
  return sorted_quantile(picked, q);
}

}  // namespace loragate::eval
