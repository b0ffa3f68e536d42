// Wilson, Newcombe (paired, method 10) and exact binomial intervals; see proportion_interval.h.
#include "evaluator/proportion_interval.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace loragate::eval {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Bisection of a function that rises from below `target` at `lo` to above it at `hi`.
template <typename F>
double solve_increasing(F f, double target, double lo, double hi) {
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (f(mid) < target ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// log of n choose k.
double log_choose(int64_t n, int64_t k) {
  return std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(k) + 1) -
         std::lgamma(static_cast<double>(n - k) + 1);
}

}  // namespace

double normal_quantile(double p) {
  if (!(p > 0 && p < 1)) return kNaN;
  const auto cdf = [](double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); };
  return solve_increasing(cdf, p, -40.0, 40.0);
}

Interval wilson_interval(int64_t successes, int64_t n, double level) {
  if (n <= 0) return Interval{kNaN, kNaN, kNaN};
  const double z = normal_quantile(0.5 + level / 2);
  const double nn = static_cast<double>(n), p = static_cast<double>(successes) / nn;
  const double z2 = z * z;
  const double centre = (p + z2 / (2 * nn)) / (1 + z2 / nn);
  const double half = z / (1 + z2 / nn) * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
  return Interval{p, std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

Interval newcombe_paired_interval(const PairedCounts& t, double level) {
  const int64_t n = t.n();
  if (n <= 0) return Interval{kNaN, kNaN, kNaN};
  const Interval first = wilson_interval(t.both + t.first_only, n, level);
  const Interval second = wilson_interval(t.both + t.second_only, n, level);
  const double d = first.estimate - second.estimate;
  // phi of the 2x2 table; 0 when a margin is empty (the arms cannot correlate then).
  const double a = static_cast<double>(t.both), b = static_cast<double>(t.first_only),
               c = static_cast<double>(t.second_only), e = static_cast<double>(t.neither);
  const double denominator = std::sqrt((a + b) * (c + e) * (a + c) * (b + e));
  const double phi = denominator > 0 ? (a * e - b * c) / denominator : 0.0;
  const double l1 = first.estimate - first.low, u1 = first.high - first.estimate;
  const double l2 = second.estimate - second.low, u2 = second.high - second.estimate;
  const double below = std::sqrt(std::max(0.0, l1 * l1 - 2 * phi * l1 * u2 + u2 * u2));
  const double above = std::sqrt(std::max(0.0, u1 * u1 - 2 * phi * u1 * l2 + l2 * l2));
  return Interval{d, std::max(-1.0, d - below), std::min(1.0, d + above)};
}

double binomial_upper_tail(int64_t n, int64_t k, double p) {
  if (k <= 0) return 1.0;
  if (k > n) return 0.0;
  if (p <= 0) return 0.0;
  if (p >= 1) return 1.0;
  double sum = 0;
  for (int64_t i = k; i <= n; ++i) {
    sum += std::exp(log_choose(n, i) + static_cast<double>(i) * std::log(p) +
                    static_cast<double>(n - i) * std::log1p(-p));
  }
  return std::min(1.0, sum);
}

Interval clopper_pearson_interval(int64_t k, int64_t n, double level) {
  if (n <= 0) return Interval{kNaN, kNaN, kNaN};
  const double tail = (1 - level) / 2;
  // P(X >= k) rises with p; P(X <= k) = 1 - P(X >= k + 1) falls with it.
  const double low = k == 0 ? 0.0 : solve_increasing([&](double p) { return binomial_upper_tail(n, k, p); }, tail, 0, 1);
  const double high =
      k == n ? 1.0 : solve_increasing([&](double p) { return binomial_upper_tail(n, k + 1, p); }, 1 - tail, 0, 1);
  return Interval{static_cast<double>(k) / static_cast<double>(n), low, high};
}

}  // namespace loragate::eval
