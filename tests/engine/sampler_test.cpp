#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

namespace loragate {
namespace {

std::vector<float> ramp_logits(int n) {
  std::vector<float> l(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) l[i] = 0.05f * static_cast<float>((i * 37) % n);
  return l;
}

TEST(SamplerTest, GreedyTakesArgmaxAndLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0.0f;
  Sampler s(p, 1);
  std::vector<float> l = {0.1f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.sample(l.data(), 4), 1);
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedDifferentTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  const auto logits = ramp_logits(100);
  auto draw = [&](uint64_t seed) {
    Sampler s(p, seed);
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) out.push_back(s.sample(logits.data(), 100));
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(SamplerTest, TopKKeepsOnlyTheKMostLikely) {
  SamplingParams p;
  p.temperature = 5.0f;  // flat, so every kept token shows up
  p.top_k = 3;
  std::vector<float> l = {1.0f, 5.0f, 3.0f, 4.0f, 2.0f, 0.5f};
  Sampler s(p, 7);
  std::set<int32_t> seen;
  for (int i = 0; i < 2000; ++i) seen.insert(s.sample(l.data(), 6));
  EXPECT_EQ(seen, (std::set<int32_t>{1, 2, 3}));
}

TEST(SamplerTest, TopPKeepsTheSmallestNucleus) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.7f;
  // Probabilities 0.5, 0.3, 0.15, 0.05: the nucleus for 0.7 is {0, 1}.
  std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  Sampler s(p, 9);
  std::map<int32_t, int> counts;
  for (int i = 0; i < 5000; ++i) ++counts[s.sample(l.data(), 4)];
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_NEAR(counts[0] / 5000.0, 0.5 / 0.8, 0.03);
}

TEST(SamplerTest, TemperatureFollowsTheSoftmax) {
  SamplingParams p;
  p.temperature = 0.5f;
  std::vector<float> l = {0.0f, std::log(2.0f)};  // at T=0.5: odds 1 : 4
  Sampler s(p, 11);
  int ones = 0;
  for (int i = 0; i < 10000; ++i) ones += s.sample(l.data(), 2);
  EXPECT_NEAR(ones / 10000.0, 0.8, 0.02);
}

// The sampler as it was before top-p ranked only the nucleus: a full sort of
// the vocabulary. The sampler must draw exactly the same tokens.
int32_t full_sort_reference(const float* logits, int64_t vocab, const SamplingParams& p, Xoshiro256& rng) {
  if (p.temperature == 0.0f) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  auto more_likely = [logits](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  size_t keep = order.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < keep) {
    keep = static_cast<size_t>(p.top_k);
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), more_likely);
  } else if (p.top_p < 1.0f) {
    std::sort(order.begin(), order.end(), more_likely);
  }
  const float max_logit = *std::max_element(logits, logits + vocab);
  std::vector<float> probs(keep);
  double sum = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    probs[i] = std::exp((logits[order[i]] - max_logit) / p.temperature);
    sum += probs[i];
  }
  if (p.top_p < 1.0f) {
    double cumulative = 0.0;
    size_t cut = keep;
    for (size_t i = 0; i < keep; ++i) {
      cumulative += probs[i] / sum;
      if (cumulative >= p.top_p) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    sum = 0.0;
    for (size_t i = 0; i < keep; ++i) sum += probs[i];
  }
  const double target = rng.uniform() * sum;
  double cumulative = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    cumulative += probs[i];
    if (target < cumulative) return order[i];
  }
  return order[keep - 1];
}

TEST(SamplerTest, DrawsExactlyWhatAFullSortDraws) {
  NormalGen normal(2024);
  int compared = 0;
  for (int64_t vocab : {1, 7, 300, 5000}) {
    for (double scale : {0.1, 1.0, 8.0}) {  // flat, moderate, peaked
      for (bool ties : {false, true}) {
        std::vector<float> logits(static_cast<size_t>(vocab));
        for (float& l : logits) {
          l = static_cast<float>(normal.next() * scale);
          if (ties) l = std::round(l * 2.0f) / 2.0f;
        }
        for (float temperature : {0.3f, 1.0f, 2.5f}) {
          for (int32_t top_k : {0, 1, 5, 100, static_cast<int32_t>(vocab) + 1}) {
            for (float top_p : {0.05f, 0.5f, 0.9f, 0.999f, 1.0f}) {
              SCOPED_TRACE("vocab " + std::to_string(vocab) + " scale " + std::to_string(scale) + " ties " +
                           std::to_string(ties) + " T " + std::to_string(temperature) + " top_k " +
                           std::to_string(top_k) + " top_p " + std::to_string(top_p));
              SamplingParams p;
              p.temperature = temperature;
              p.top_k = top_k;
              p.top_p = top_p;
              const uint64_t seed = 1000 + static_cast<uint64_t>(compared);
              Sampler sampler(p, seed);
              Xoshiro256 rng(seed);
              for (int draw = 0; draw < 20; ++draw) {
                ASSERT_EQ(sampler.sample(logits.data(), vocab), full_sort_reference(logits.data(), vocab, p, rng))
                    << "draw " << draw;
              }
              ++compared;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, 4 * 3 * 2 * 3 * 5 * 5);
}

TEST(SamplerTest, ValidateNamesTheBadField) {
  SamplingParams p;
  p.temperature = -1.0f;
  EXPECT_NE(p.validate().message().find("temperature"), std::string::npos);
  p = {};
  p.top_p = 0.0f;
  EXPECT_NE(p.validate().message().find("top_p"), std::string::npos);
  p = {};
  p.max_tokens = -3;
  EXPECT_NE(p.validate().message().find("max_tokens"), std::string::npos);
  p = {};
  p.top_k = -1;
  EXPECT_NE(p.validate().message().find("top_k"), std::string::npos);
  EXPECT_TRUE(SamplingParams{}.validate().is_ok());
}

TEST(LogprobsTest, LogSoftmaxOfTheChosenTokenAndTheTopAlternatives) {
  const std::vector<float> l = {1.0f, 3.0f, 2.0f, 3.0f};
  const TokenLogprobs lp = compute_logprobs(l.data(), 4, 2, 3);
  const double z = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0));
  EXPECT_NEAR(lp.logprob, 2.0 - z, 1e-6);
  EXPECT_EQ(lp.rank, 3) << "tokens 1 and 3 are more likely";
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);  // ties by id
  EXPECT_EQ(lp.top[1].first, 3);
  EXPECT_EQ(lp.top[2].first, 2);
  EXPECT_NEAR(lp.top[0].second, 3.0 - z, 1e-6);
  EXPECT_TRUE(compute_logprobs(l.data(), 4, 0, 0).top.empty());
  SamplingParams p;
  p.logprobs = 21;
  EXPECT_NE(p.validate().message().find("logprobs"), std::string::npos);
}

// The one-scan selection must agree with a full sort, ties by id included.
TEST(LogprobsTest, TopAlternativesEqualAFullSort) {
  std::vector<float> l(1000);
  for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>((i * 7919) % 97) / 8.0f;  // many ties
  std::vector<int32_t> ids(l.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  for (int32_t n : {1, 5, 20}) {
    const TokenLogprobs lp = compute_logprobs(l.data(), static_cast<int64_t>(l.size()), 3, n);
    ASSERT_EQ(lp.top.size(), static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) EXPECT_EQ(lp.top[i].first, ids[i]) << "rank " << i;
    EXPECT_EQ(lp.rank, std::find(ids.begin(), ids.end(), 3) - ids.begin() + 1);
  }
}

}  // namespace
}  // namespace loragate
