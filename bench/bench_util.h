// Small helpers shared by the benchmarks: medians, percentiles, clocks,
// synthetic prompts and greedy requests.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "engine/engine.h"

namespace loragate::bench {

using BenchClock = std::chrono::steady_clock;

inline double seconds_since(BenchClock::time_point t) {
  return std::chrono::duration<double>(BenchClock::now() - t).count();
}

// The p-th percentile (0..100) by nearest rank; 0 for an empty set.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(rank, v.size() - 1)];
}

inline double median(std::vector<double> v) { return percentile(std::move(v), 50.0); }

// A deterministic prompt of `len` ordinary token ids.
inline std::vector<int32_t> synthetic_prompt(int len, int64_t vocab, int salt) {
  std::vector<int32_t> ids(static_cast<size_t>(len));
  for (int i = 0; i < len; ++i) ids[i] = static_cast<int32_t>(3 + (i * 7919 + salt * 104729) % (vocab - 3));
  return ids;
}

// Greedy, EOS ignored: every request generates exactly `max_tokens`.
inline GenerationRequest greedy_request(int prompt_len, int max_tokens, int64_t vocab, int salt) {
  GenerationRequest r;
  r.prompt_ids = synthetic_prompt(prompt_len, vocab, salt);
  r.params.temperature = 0.0f;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

}  // namespace loragate::bench
