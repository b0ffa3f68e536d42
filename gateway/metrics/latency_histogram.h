// LatencyHistogram: a fixed-size histogram of latencies in milliseconds, for
// figures kept over a server's lifetime (shadow traffic) where a list of every
// sample would grow without bound.
//
// Buckets are log-spaced, each 5% wider than the last, from 0.01 ms to about
// 10^6 ms (smaller values land in the first bucket, larger in the last), so a
// percentile is within 2.5% of the exact one. add() is O(1) and allocates
// nothing; the whole histogram is a few KiB and cheap to copy, so a reader
// copies it under its owner's lock and computes percentiles after.
//
// Not thread-safe: its owner guards it.
#pragma once

#include <array>
#include <cstdint>

namespace loragate {

class LatencyHistogram {
 public:
  static constexpr int kBuckets = 380;
  static constexpr double kMinMs = 0.01;
  static constexpr double kGrowth = 1.05;

  void add(double ms);
  int64_t count() const { return count_; }
  // The p-th percentile (p in percent, clamped to [0, 100]): the geometric
  // middle of the bucket holding it; 0 when empty.
  double percentile(double p) const;

 private:
  std::array<int64_t, kBuckets> counts_{};
  int64_t count_ = 0;
};

}  // namespace loragate
