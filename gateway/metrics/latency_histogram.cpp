#include "gateway/metrics/latency_histogram.h"

#include <algorithm>
#include <cmath>

namespace loragate {
namespace {

const double kLogGrowth = std::log(LatencyHistogram::kGrowth);

// Bucket i holds [kMinMs * kGrowth^i, kMinMs * kGrowth^(i+1)).
int bucket_of(double ms) {
  if (!(ms > LatencyHistogram::kMinMs)) return 0;  // NaN too
  const double i = std::floor(std::log(ms / LatencyHistogram::kMinMs) / kLogGrowth);
  return static_cast<int>(std::min(i, static_cast<double>(LatencyHistogram::kBuckets - 1)));
}

}  // namespace

void LatencyHistogram::add(double ms) {
  ++counts_[static_cast<size_t>(bucket_of(ms))];
  ++count_;
}

double LatencyHistogram::percentile(double p) const {
  if (count_ == 0) return 0.0;
  p = std::clamp(p, 0.0, 100.0);
  // The rank of the sample wanted, 1-based: at least the first, at most the last.
  const int64_t rank = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(p / 100.0 * static_cast<double>(count_))),
                                           1, count_);
  int64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += counts_[static_cast<size_t>(i)];
    if (seen >= rank) return kMinMs * std::pow(kGrowth, i + 0.5);
  }
  return kMinMs * std::pow(kGrowth, kBuckets - 0.5);
}

}  // namespace loragate
