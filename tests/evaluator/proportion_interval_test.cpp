// The small-sample statistics of the gates: Wilson, Newcombe (paired) and the
// exact binomial tail and interval, against values worked out by hand
// (tests/evaluator: independent arithmetic of the published formulas).
#include "evaluator/proportion_interval.h"

#include <gtest/gtest.h>

#include <cmath>

namespace loragate::eval {
namespace {

TEST(ProportionInterval, NormalQuantile) {
  EXPECT_NEAR(normal_quantile(0.975), 1.959963985, 1e-8);
  EXPECT_NEAR(normal_quantile(0.5), 0.0, 1e-12);
  EXPECT_NEAR(normal_quantile(0.05), -1.644853627, 1e-8);
  EXPECT_TRUE(std::isnan(normal_quantile(1.0)));
}

TEST(ProportionInterval, WilsonDoesNotCollapseAtOneOrZero) {
  // 10/10 at 95%: n / (n + z^2) = 0.7225, the reason a 0.80 floor cannot pass on 10 items.
  const Interval ten = wilson_interval(10, 10, 0.95);
  EXPECT_DOUBLE_EQ(ten.estimate, 1.0);
  EXPECT_NEAR(ten.low, 0.72247, 1e-5);
  EXPECT_NEAR(ten.high, 1.0, 1e-12);
  const Interval none = wilson_interval(0, 40, 0.95);
  EXPECT_EQ(none.low, 0.0);
  EXPECT_NEAR(none.high, 0.08762, 1e-5);
  const Interval all = wilson_interval(40, 40, 0.95);
  EXPECT_NEAR(all.low, 0.91238, 1e-5);
  const Interval half = wilson_interval(20, 40, 0.95);
  EXPECT_NEAR(half.low + half.high, 1.0, 1e-12);  // symmetric about 1/2
  EXPECT_TRUE(std::isnan(wilson_interval(0, 0, 0.95).low));
}

TEST(ProportionInterval, NewcombePairedDifference) {
  // 40/40 against 40/40: phi is undefined (an empty margin) and taken as 0.
  const Interval same = newcombe_paired_interval({40, 0, 0, 0}, 0.95);
  EXPECT_DOUBLE_EQ(same.estimate, 0.0);
  EXPECT_NEAR(same.low, -0.08762, 1e-5);
  EXPECT_NEAR(same.high, 0.08762, 1e-5);
  // 5 right only in the first arm and 5 only in the second, 30 in both: phi = -25/175.
  const Interval churn = newcombe_paired_interval({30, 5, 5, 0}, 0.95);
  EXPECT_DOUBLE_EQ(churn.estimate, 0.0);
  EXPECT_NEAR(churn.low, -0.16194, 1e-5);
  EXPECT_NEAR(churn.high, 0.16194, 1e-5);
  // Half the items lost: -0.5, interval -0.648..-0.328.
  const Interval lost = newcombe_paired_interval({20, 0, 20, 0}, 0.95);
  EXPECT_DOUBLE_EQ(lost.estimate, -0.5);
  EXPECT_NEAR(lost.low, -0.64800, 1e-5);
  EXPECT_NEAR(lost.high, -0.32800, 1e-5);
  // 0/40 against 1/40 (a bare base's keyword rate): -0.129..+0.065.
  const Interval bare = newcombe_paired_interval({0, 0, 1, 39}, 0.95);
  EXPECT_NEAR(bare.low, -0.12881, 1e-5);
  EXPECT_NEAR(bare.high, 0.06500, 1e-5);
  EXPECT_TRUE(std::isnan(newcombe_paired_interval({}, 0.95).estimate));
}

TEST(ProportionInterval, ExactBinomial) {
  EXPECT_NEAR(binomial_upper_tail(40, 5, 0.03), 0.0066701057, 1e-9);
  EXPECT_NEAR(binomial_upper_tail(40, 4, 0.03), 0.0313968040, 1e-9);
  EXPECT_EQ(binomial_upper_tail(40, 0, 0.03), 1.0);
  EXPECT_EQ(binomial_upper_tail(40, 41, 0.5), 0.0);
  EXPECT_EQ(binomial_upper_tail(40, 1, 0.0), 0.0);
  const Interval five = clopper_pearson_interval(5, 40, 0.95);
  EXPECT_DOUBLE_EQ(five.estimate, 0.125);
  EXPECT_NEAR(five.low, 0.0418596, 1e-6);
  EXPECT_NEAR(binomial_upper_tail(40, 5, five.low), 0.025, 1e-9);
  EXPECT_NEAR(1 - binomial_upper_tail(40, 6, five.high), 0.025, 1e-9);
  const Interval zero = clopper_pearson_interval(0, 40, 0.95);
  EXPECT_EQ(zero.low, 0.0);
  EXPECT_NEAR(zero.high, 1 - std::pow(0.025, 1.0 / 40), 1e-9);
}

}  // namespace
}  // namespace loragate::eval
