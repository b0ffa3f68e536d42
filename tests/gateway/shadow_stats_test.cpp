// Shadow traffic statistics stay bounded: fixed-size latency histograms whose
// percentiles stay within 2.5% of the exact ones, fed through ShadowLedger.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

#include "gateway/metrics/latency_histogram.h"
#include "gateway/shadow_traffic.h"

namespace loragate {
namespace {

double exact_percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

TEST(LatencyHistogram, PercentilesWithinTwoAndAHalfPercentOfExact) {
  std::mt19937 rng(7);
  std::lognormal_distribution<double> latency(std::log(40.0), 1.2);  // ms: a long tail
  LatencyHistogram h;
  std::vector<double> all;
  for (int i = 0; i < 100000; ++i) {
    const double ms = latency(rng);
    h.add(ms);
    all.push_back(ms);
  }
  EXPECT_EQ(h.count(), 100000);
  for (double p : {1.0, 50.0, 90.0, 99.0, 100.0}) {
    const double exact = exact_percentile(all, p);
    EXPECT_NEAR(h.percentile(p), exact, 0.025 * exact + 1e-9) << "p" << p;
  }
}

TEST(LatencyHistogram, EmptyTinyHugeAndNaN) {
  LatencyHistogram h;
  EXPECT_EQ(h.percentile(50), 0.0);
  h.add(0);
  h.add(-3);
  h.add(std::nan(""));
  EXPECT_LT(h.percentile(100), 0.011);
  h.add(1e12);
  EXPECT_GT(h.percentile(100), 1e5);
  EXPECT_EQ(h.count(), 4);
}

GenerationResult finished(double ttft, std::vector<int32_t> ids) {
  GenerationResult r;
  r.finish_reason = FinishReason::kLength;
  r.ttft_ms = ttft;
  r.itl_ms = {2.0, 4.0};
  r.output_ids = std::move(ids);
  return r;
}

// Issue 19: every compared pair appended four doubles forever. The figures now
// live in fixed-size histograms: a long run leaves ShadowStats the same size.
TEST(ShadowLedger, StatisticsOfManyPairsStayFixedSizeAndExact) {
  static_assert(std::is_trivially_copyable_v<LatencyHistogram>, "a histogram is a fixed block, copied by describe()");
  ShadowLedger ledger;
  ledger.targets["cand"].fraction = 1;
  for (int i = 0; i < 50000; ++i) {
    const GenerationResult live = finished(10.0 + i % 100, {1, 2, 3});
    const GenerationResult shadow = finished(20.0 + i % 100, {1, 2, i % 2 == 0 ? 3 : 4});
    ledger.record("cand", "mia", &live, &shadow, /*greedy=*/true);
  }
  const ShadowStats& s = ledger.targets["cand"].stats["mia"];
  EXPECT_EQ(s.compared, 50000);
  EXPECT_EQ(s.agreed, 25000);
  EXPECT_EQ(s.live_ttft_ms.count(), 50000);
  EXPECT_NEAR(s.live_ttft_ms.percentile(50), 59.0, 59.0 * 0.025);
  EXPECT_NEAR(s.shadow_tpot_ms.percentile(50), 3.0, 3.0 * 0.025);
  ledger.record("gone", "mia", nullptr, nullptr, true);  // an unknown base or a missing half: nothing recorded
  EXPECT_EQ(ledger.targets.count("gone"), 0u);
}

}  // namespace
}  // namespace loragate
