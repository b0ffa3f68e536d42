#include "evaluator/runner_order.h"

#include <algorithm>
#include <numeric>

namespace loragate::eval {
namespace {

// SplitMix64 (Steele et al.): spelled out rather than std::mt19937 with
// std::shuffle, whose algorithm differs between standard libraries, so a
// stored run's orders can be drawn again anywhere.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

}  // namespace

std::vector<size_t> arm_order(uint64_t seed, const std::string& scenario, size_t item, size_t n_arms) {
  std::vector<size_t> order(n_arms);
  std::iota(order.begin(), order.end(), size_t{0});
  uint64_t scenario_state = seed ^ fnv1a(scenario);
  const uint64_t scenario_key = splitmix64(scenario_state);
  uint64_t state = scenario_key ^ (static_cast<uint64_t>(item) * 0xD1B54A32D192ED03ull);
  for (size_t i = n_arms; i > 1; --i) {  // Fisher-Yates
    std::swap(order[i - 1], order[splitmix64(state) % i]);
  }
  if (n_arms < 2) return order;
  // Balance the pair the latency gates compare: online first on every other item.
  const bool online_first = ((item + (scenario_key & 1)) % 2) == 0;
  auto online = std::find(order.begin(), order.end(), size_t{0});
  auto candidate = std::find(order.begin(), order.end(), size_t{1});
  if ((online < candidate) != online_first) std::iter_swap(online, candidate);
  return order;
}

}  // namespace loragate::eval
