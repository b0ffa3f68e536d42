// The paired bootstrap: determinism for a seed, coverage, what pairing buys,
// and the statistics helpers the gates use.
#include "evaluator/bootstrap.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/random.h"

namespace loragate::eval {
namespace {

std::vector<double> normal_values(size_t n, double mean, double sd, uint64_t seed) {
  NormalGen gen(seed);
  std::vector<double> v(n);
  for (double& x : v) x = mean + sd * gen.next();
  return v;
}

SampleStatistic mean_of(const std::vector<double>& values) {
  return [&values](const std::vector<uint32_t>& s) { return sample_mean(values, s); };
}

TEST(BootstrapTest, SameSeedSameIntervalOtherSeedAnother) {
  const std::vector<double> v = normal_values(50, 0.0, 1.0, 11);
  const BootstrapOptions a{.samples = 500, .level = 0.95, .seed = 7};
  const Interval x = paired_bootstrap(v.size(), mean_of(v), a);
  const Interval y = paired_bootstrap(v.size(), mean_of(v), a);
  EXPECT_EQ(x.estimate, y.estimate);
  EXPECT_EQ(x.low, y.low);
  EXPECT_EQ(x.high, y.high);

  BootstrapOptions b = a;
  b.seed = 8;
  const Interval z = paired_bootstrap(v.size(), mean_of(v), b);
  EXPECT_EQ(x.estimate, z.estimate);  // the full sample does not depend on the seed
  EXPECT_NE(x.low, z.low);
}

// The draws are xoshiro256** scaled to [0, n), fixed on every platform: these
// numbers must not move when the standard library or compiler changes.
TEST(BootstrapTest, DrawsArePinned) {
  std::vector<std::vector<uint32_t>> seen;
  const SampleStatistic record = [&](const std::vector<uint32_t>& s) {
    seen.push_back(s);
    return 0.0;
  };
  (void)paired_bootstrap(5, record, BootstrapOptions{.samples = 100, .level = 0.9, .seed = 1});
  ASSERT_EQ(seen.size(), 101u);  // the full sample, then the draws
  EXPECT_EQ(seen[0], (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(seen[1], (std::vector<uint32_t>{3, 2, 2, 1, 3}));
  EXPECT_EQ(seen[2], (std::vector<uint32_t>{0, 0, 1, 4, 2}));
}

TEST(BootstrapTest, EstimateIsTheFullSampleStatistic) {
  const std::vector<double> v = {1, 2, 3, 4, 10};
  const Interval iv = paired_bootstrap(v.size(), mean_of(v), BootstrapOptions{});
  EXPECT_DOUBLE_EQ(iv.estimate, 4.0);
  EXPECT_LE(iv.low, iv.estimate);
  EXPECT_GE(iv.high, iv.estimate);
  EXPECT_GE(iv.low, 1.0);
  EXPECT_LE(iv.high, 10.0);
}

// One data set: its 95% interval holds the mean with probability 0.95 (the
// next test checks the rate); this seed's sample mean is 0.123.
TEST(BootstrapTest, IntervalOfNormalMeanContainsTheMean) {
  const std::vector<double> v = normal_values(400, 0.1, 1.0, 1);
  const Interval iv = paired_bootstrap(v.size(), mean_of(v), BootstrapOptions{});
  EXPECT_LT(iv.low, 0.1);
  EXPECT_GT(iv.high, 0.1);
  // About 2 * 1.96 / sqrt(400) = 0.196 wide.
  EXPECT_NEAR(iv.high - iv.low, 0.196, 0.04);
}

// Over many data sets a 95% interval holds the true mean about 95% of the time.
TEST(BootstrapTest, CoverageIsNearTheLevel) {
  int covered = 0;
  const int kSets = 200;
  for (int k = 0; k < kSets; ++k) {
    const std::vector<double> v = normal_values(60, 0.1, 1.0, 100 + k);
    const Interval iv = paired_bootstrap(v.size(), mean_of(v), BootstrapOptions{.samples = 1000, .level = 0.95, .seed = 5});
    covered += iv.low <= 0.1 && 0.1 <= iv.high;
  }
  EXPECT_GE(covered, 176);  // 88%: percentile intervals run a little narrow at n = 60
  EXPECT_LE(covered, 199);
}

// Items differ far more among themselves (sd 1) than the arms differ on an
// item (sd 0.05): pairing cancels item difficulty, so its interval is much
// narrower than resampling the arms on their own, and both hold the true 0.1.
TEST(BootstrapTest, PairedIsNarrowerOnCorrelatedData) {
  const size_t n = 80;
  const std::vector<double> difficulty = normal_values(n, 0.0, 1.0, 31);
  const std::vector<double> noise_a = normal_values(n, 0.0, 0.05, 32), noise_b = normal_values(n, 0.0, 0.05, 33);
  std::vector<double> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = difficulty[i] + 0.1 + noise_a[i];
    b[i] = difficulty[i] + noise_b[i];
  }
  const BootstrapOptions options;
  const Interval paired = paired_bootstrap(
      n, [&](const std::vector<uint32_t>& s) { return sample_mean(a, s) - sample_mean(b, s); }, options);
  const Interval unpaired = unpaired_bootstrap(
      n, n,
      [&](const std::vector<uint32_t>& sa, const std::vector<uint32_t>& sb) {
        return sample_mean(a, sa) - sample_mean(b, sb);
      },
      options);
  EXPECT_DOUBLE_EQ(paired.estimate, unpaired.estimate);
  EXPECT_LT(paired.low, 0.1);
  EXPECT_GT(paired.high, 0.1);
  EXPECT_LT(unpaired.low, 0.1);
  EXPECT_GT(unpaired.high, 0.1);
  EXPECT_LT(paired.high - paired.low, 0.2 * (unpaired.high - unpaired.low));
  // The paired interval excludes 0; the unpaired one cannot tell the arms apart.
  EXPECT_GT(paired.low, 0.0);
  EXPECT_LT(unpaired.low, 0.0);
}

TEST(BootstrapTest, NonFiniteDrawsAreDroppedAndEmptyIsNaN) {
  // A rate over the items with a rule (weight 1): some draws pick only weight-0 items.
  const std::vector<double> hit = {1, 0, 0, 0}, weight = {1, 0, 0, 0};
  const Interval iv = paired_bootstrap(
      4, [&](const std::vector<uint32_t>& s) { return sample_ratio(hit, weight, s); }, BootstrapOptions{});
  EXPECT_DOUBLE_EQ(iv.estimate, 1.0);
  EXPECT_DOUBLE_EQ(iv.low, 1.0);
  EXPECT_DOUBLE_EQ(iv.high, 1.0);

  const Interval none = paired_bootstrap(0, [](const std::vector<uint32_t>&) { return 1.0; }, BootstrapOptions{});
  EXPECT_TRUE(std::isnan(none.estimate));
  EXPECT_TRUE(std::isnan(none.low));
  EXPECT_TRUE(std::isnan(none.high));
}

TEST(BootstrapTest, Helpers) {
  const std::vector<double> v = {4, 1, 3, 2};
  const std::vector<uint32_t> all = {0, 1, 2, 3}, repeats = {0, 0, 1};
  EXPECT_DOUBLE_EQ(sample_mean(v, all), 2.5);
  EXPECT_DOUBLE_EQ(sample_mean(v, repeats), 3.0);
  EXPECT_TRUE(std::isnan(sample_mean(v, {})));

  // Token-weighted: sum(nll) / sum(tokens), not the mean of per-item ratios.
  const std::vector<double> nll = {1.0, 9.0}, tokens = {1, 9};
  EXPECT_DOUBLE_EQ(sample_ratio(nll, tokens, {0, 1}), 1.0);
  EXPECT_DOUBLE_EQ(sample_ratio(nll, tokens, {1, 1, 0}), 19.0 / 19.0);
  EXPECT_TRUE(std::isnan(sample_ratio(nll, {0, 0}, {0, 1})));

  // numpy.percentile's "linear": r = q * (n - 1) between the closest ranks.
  EXPECT_DOUBLE_EQ(sample_quantile(v, all, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(sample_quantile(v, all, 0.99), 3.97);
  EXPECT_DOUBLE_EQ(sample_quantile(v, all, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(sample_quantile(v, all, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(sample_quantile(v, repeats, 0.5), 4.0);  // {1, 4, 4}
  EXPECT_TRUE(std::isnan(sample_quantile(v, {}, 0.5)));
}

// A latency gate's statistic: candidate p99 / online p99 - 1. Scaling every
// item by 1.2 scales every quantile by 1.2, in every draw.
TEST(BootstrapTest, QuantileRatioOfScaledArms) {
  const std::vector<double> online = normal_values(40, 50.0, 5.0, 77);
  std::vector<double> candidate = online;
  for (double& x : candidate) x *= 1.2;
  const Interval iv = paired_bootstrap(
      online.size(),
      [&](const std::vector<uint32_t>& s) {
        return sample_quantile(candidate, s, 0.99) / sample_quantile(online, s, 0.99) - 1.0;
      },
      BootstrapOptions{});
  EXPECT_NEAR(iv.estimate, 0.2, 1e-12);
  EXPECT_NEAR(iv.low, 0.2, 1e-12);
  EXPECT_NEAR(iv.high, 0.2, 1e-12);
}

}  // namespace
}  // namespace loragate::eval
