// The order in which an item's arms run. Machine noise drifts (clocks,
// caches, other processes), so an arm that always ran first would be timed
// under other conditions than one that always ran second; the order is drawn
// per item instead, and balanced so that the online arm runs before the
// candidate on exactly every other item. Drawn from the run's seed, the
// scenario and the item's index: the same run repeats the same orders.
//
// Pure functions; safe to call from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace loragate::eval {

// A permutation of 0..n_arms-1: the arms of item `item` of `scenario` in the
// order they run. Arm 0 is the online arm and arm 1 the candidate; whether 0
// comes before 1 alternates from item to item (which of the two starts
// depends on the seed and the scenario). Arms past 1 take random places.
std::vector<size_t> arm_order(uint64_t seed, const std::string& scenario, size_t item, size_t n_arms);

}  // namespace loragate::eval
