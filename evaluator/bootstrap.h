// A seeded bootstrap for comparing two arms item by item.
//
// The gates compare candidate and online on the same eval items, so the
// resampling is paired: one draw of item indices (with replacement) is used
// for both arms, and the statistic of a draw is a difference (or a ratio) of
// the two arms' statistics on those indices. Item difficulty then cancels out
// of the interval instead of widening it. The interval is the percentile
// interval of the resampled statistics; the estimate is the statistic on the
// full sample (every index once).
//
// Draws come from common/random.h's xoshiro256** (not a std:: distribution,
// whose output differs between standard libraries), so one seed gives the
// same interval on every platform.
//
// Pure functions of their arguments; safe to call from many threads as long
// as the statistic is.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace loragate::eval {

struct BootstrapOptions {
  int32_t samples = 2000;  // resamples drawn; the interval's ends are their percentiles
  double level = 0.95;     // two-sided confidence level, in (0, 1)
  uint64_t seed = 1;       // the same seed and data give the same interval everywhere
  bool operator==(const BootstrapOptions&) const = default;
};

struct Interval {
  double estimate = 0;  // the statistic on the full sample
  double low = 0;       // the (1 - level) / 2 percentile of the resampled statistics
  double high = 0;      // the (1 + level) / 2 percentile
};

// The statistic of one draw: `sample` holds n item indices in [0, n), repeats
// allowed. A non-finite result (e.g. a ratio whose denominator the draw left
// at 0) drops that draw from the percentiles.
using SampleStatistic = std::function<double(const std::vector<uint32_t>& sample)>;

// Paired bootstrap over n items: `statistic` sees the same indices for both
// arms, so it returns e.g. candidate_mean(sample) - online_mean(sample). The
// estimate is statistic(0, 1, ..., n-1). With n == 0, or when no draw is
// finite, low and high are NaN.
Interval paired_bootstrap(size_t n, const SampleStatistic& statistic, const BootstrapOptions& options);

// The unpaired counterpart, for arms whose items do not correspond: each arm
// is resampled on its own (n_a and n_b indices per draw). Used to show what
// pairing buys; the gates pair.
using UnpairedStatistic =
    std::function<double(const std::vector<uint32_t>& sample_a, const std::vector<uint32_t>& sample_b)>;
Interval unpaired_bootstrap(size_t n_a, size_t n_b, const UnpairedStatistic& statistic,
                            const BootstrapOptions& options);

// --- statistics of a draw ----------------------------------------------------

// The mean of values[i] over the sample (NaN for an empty sample).
double sample_mean(const std::vector<double>& values, const std::vector<uint32_t>& sample);

// sum(numerator[i]) / sum(denominator[i]) over the sample: a token-weighted
// mean such as nll_mean = sum(nll_sum) / sum(n_ref_tokens), or a rate over the
// items a 0/1 weight selects. NaN when the denominator sums to 0.
double sample_ratio(const std::vector<double>& numerator, const std::vector<double>& denominator,
                    const std::vector<uint32_t>& sample);

// The q-quantile (q in [0, 1]) of values[i] over the sample, interpolated
// linearly between the closest ranks (numpy's default, as metrics.h's
// percentile(): q = 0.99 there is p = 99). NaN for an empty sample.
double sample_quantile(const std::vector<double>& values, const std::vector<uint32_t>& sample, double q);

}  // namespace loragate::eval
