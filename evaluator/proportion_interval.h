// Confidence intervals and exact tests for proportions, the gates'
// small-sample statistics where a bootstrap fails: when every item is right
// in both arms a bootstrap interval collapses to [0, 0], while these keep the
// uncertainty that 40 items leave.
//
// * wilson_interval: the Wilson score interval of x successes in n trials
//   (Wilson 1927), used for floors and ceilings on a rate. At 10/10 and 95% it
//   is [0.722, 1].
// * newcombe_paired_interval: the difference of two proportions measured on
//   the same items (Newcombe 1998, "Improved confidence intervals for the
//   difference between binomial proportions based on paired data", method 10:
//   Wilson score limits of each margin combined with the phi correlation of
//   the 2x2 table). It does not collapse at 0 or 1: 40/40 against 40/40 is
//   [-0.088, +0.088] at 95%.
// * binomial_upper_tail / clopper_pearson_interval: the exact binomial tail
//   and the exact (Clopper-Pearson 1934) interval, for the negative-flip gate.
//
// Two-sided intervals at `level` in (0, 1). Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "evaluator/bootstrap.h"

namespace loragate::eval {

// z with P(N(0, 1) <= z) = p, for p in (0, 1).
double normal_quantile(double p);

// Wilson score interval of successes / n; estimate successes / n. NaN when n <= 0.
Interval wilson_interval(int64_t successes, int64_t n, double level);

// The 2x2 table of two 0/1 outcomes on the same items.
struct PairedCounts {
  int64_t both = 0;         // right in both arms
  int64_t first_only = 0;   // right in the first arm only
  int64_t second_only = 0;  // right in the second arm only
  int64_t neither = 0;
  int64_t n() const { return both + first_only + second_only + neither; }
};

// Newcombe's method 10 interval of p_first - p_second; NaN when n == 0.
Interval newcombe_paired_interval(const PairedCounts& t, double level);

// P(X >= k) for X ~ Binomial(n, p), summed exactly (in log space).
double binomial_upper_tail(int64_t n, int64_t k, double p);

// The exact interval of k / n: the low end is the p with P(X >= k) =
// (1 - level) / 2 (0 when k == 0), the high end the p with P(X <= k) =
// (1 - level) / 2 (1 when k == n). NaN when n <= 0.
Interval clopper_pearson_interval(int64_t k, int64_t n, double level);

}  // namespace loragate::eval
