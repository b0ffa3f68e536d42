// BatchSampler (train_data.h): which examples each micro-batch trains on.
//
// Every draw comes from xoshiro256** (common/random.h) seeded by a hash of
// (seed, stream, index), never from a running generator: micro-batch n (or
// epoch e) can then be drawn again from nothing, which is what makes seek()
// cheap and a resumed run draw exactly what the uninterrupted one would.
#include <algorithm>
#include <numeric>
#include <utility>

#include "common/random.h"
#include "trainer/train_data.h"

namespace loragate::train {
namespace {

// Separate streams, so that micro-batch n and epoch n never share draws.
constexpr uint64_t kReplacementStream = 0x7265706c61636521ull;
constexpr uint64_t kShuffleStream = 0x73687566666c6521ull;

uint64_t sampler_stream_seed(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t state = seed ^ stream;
  state = splitmix64(state) + index * 0x9e3779b97f4a7c15ull;  // unsigned: wraps, defined
  return splitmix64(state);
}

// Uniform in [0, n), n >= 1, without modulo bias: draws below 2^64 mod n are
// thrown away, so every residue has the same number of draws behind it.
uint64_t sampler_uniform_below(Xoshiro256& rng, uint64_t n) {
  const uint64_t threshold = (0 - n) % n;
  for (;;) {
    const uint64_t r = rng.next();
    if (r >= threshold) return r % n;
  }
}

}  // namespace

BatchSampler::BatchSampler(int64_t num_examples, int64_t batch, uint64_t seed, Sampling sampling)
    : num_examples_(num_examples), batch_(batch), seed_(seed), sampling_(sampling) {
  seek(0);
}

std::vector<int64_t> BatchSampler::next() {
  std::vector<int64_t> out;
  if (num_examples_ <= 0 || batch_ <= 0) return out;
  out.reserve(static_cast<size_t>(batch_));
  if (sampling_ == Sampling::kReplacement) {
    Xoshiro256 rng(sampler_stream_seed(seed_, kReplacementStream, static_cast<uint64_t>(position_)));
    for (int64_t b = 0; b < batch_; ++b) {
      out.push_back(static_cast<int64_t>(sampler_uniform_below(rng, static_cast<uint64_t>(num_examples_))));
    }
  } else {
    for (int64_t b = 0; b < batch_; ++b) {
      if (cursor_ == num_examples_) {
        shuffle_epoch(epoch_ + 1);
        cursor_ = 0;
      }
      out.push_back(permutation_[static_cast<size_t>(cursor_++)]);
    }
  }
  ++position_;
  return out;
}

void BatchSampler::seek(int64_t micro_batches) {
  position_ = std::max<int64_t>(micro_batches, 0);
  if (sampling_ != Sampling::kShuffle || num_examples_ <= 0 || batch_ <= 0) return;
  // Examples drawn so far: position * batch = epoch * N + cursor. Split so
  // that no product is larger than N * batch (unsigned: never UB).
  const uint64_t n = static_cast<uint64_t>(num_examples_);
  const uint64_t batch = static_cast<uint64_t>(batch_);
  const uint64_t whole = static_cast<uint64_t>(position_) / n;  // position = whole * N + rest
  const uint64_t rest_drawn = (static_cast<uint64_t>(position_) % n) * batch;
  const int64_t epoch = static_cast<int64_t>(whole * batch + rest_drawn / n);
  if (epoch != epoch_) shuffle_epoch(epoch);
  cursor_ = static_cast<int64_t>(rest_drawn % n);
}

void BatchSampler::shuffle_epoch(int64_t epoch) {
  permutation_.resize(static_cast<size_t>(num_examples_));
  std::iota(permutation_.begin(), permutation_.end(), int64_t{0});
  Xoshiro256 rng(sampler_stream_seed(seed_, kShuffleStream, static_cast<uint64_t>(epoch)));
  for (size_t i = permutation_.size(); i > 1; --i) {  // Fisher-Yates
    std::swap(permutation_[i - 1], permutation_[static_cast<size_t>(sampler_uniform_below(rng, i))]);
  }
  epoch_ = epoch;
}

}  // namespace loragate::train
