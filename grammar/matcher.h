// Matcher: runs a Grammar as a pushdown automaton over bytes, one per sequence.
//
// A parse stack is a list of "what comes next" positions, the innermost rule
// on top, kept as hash-consed nodes shared between stacks, so equal stacks
// are one id. A matcher state is the sorted set of stacks still alive; states
// are interned too, and every (state, byte) transition is remembered in a
// 256-entry row. The token-mask search walks the vocabulary's byte trie with
// these rows, so after the first walk from a context it is table lookups;
// inside a JSON string, for instance, most bytes lead back to the same state.
// A state's token mask is cached as well. The tables are bounded: past the
// budget the matcher starts afresh and replays the bytes it has consumed.
// Not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace loragate::grammar {

class Matcher {
 public:
  using State = std::vector<int32_t>;  // sorted stack ids; -1 = the empty stack (accepted)
  using StateId = int32_t;
  static constexpr StateId kDead = -1;  // no stack survives
  static constexpr int32_t kEmptyStack = -1;

  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  // The current state and its stacks.
  StateId state_id() const { return current_; }
  const State& state() const { return states_[static_cast<size_t>(current_)]; }
  // The bytes so far are a whole sentence of the grammar.
  bool accepts() const { return accepts(current_); }
  bool accepts(StateId s) const;
  // Some byte may follow the bytes so far.
  bool can_continue() const;
  // The bytes that may come next.
  ByteSet next_bytes() const;

  // Consumes bytes; all or nothing: false leaves the state as it was.
  bool advance(std::string_view bytes);
  // The state after `byte` from state `from`, or kDead (memoised).
  StateId transition(StateId from, uint8_t byte);

  // A cached token mask per state (see token_mask.h), or nullptr.
  const std::vector<uint64_t>* cached_mask(StateId s) const;
  void cache_mask(StateId s, std::vector<uint64_t> mask);
  // Starts afresh (replaying what was consumed) when the tables outgrew their budget;
  // only between searches, since it renumbers states.
  void trim();

  size_t num_states() const { return states_.size(); }
  // A step met more parses alive at once than the matcher follows (an
  // ambiguous grammar); such a step counts as a dead end.
  bool too_ambiguous() const { return too_ambiguous_; }
  const Grammar& grammar() const { return *grammar_; }

 private:
  // The grammar flattened: each alternative's elements in a row, then an end
  // marker (nullptr); a position is an index into it.
  struct Node {
    int32_t pos;     // the next thing to match in some alternative
    int32_t parent;  // the stack below (whose top is where the caller goes on); kEmptyStack at the bottom
  };
  void reset();
  // The id of the stack (pos, parent), made if new.
  int32_t intern(int32_t pos, int32_t parent);
  StateId intern_state(State s);
  // Adds to `out` every stack that stack `id` expands to whose top is a byte
  // set, or the empty stack: rule references are opened and finished
  // alternatives popped. `seen` (cleared per step) stops repeats.
  void expand(int32_t id, State& out, std::vector<int32_t>& seen);
  State step(const State& from, uint8_t byte);

  struct StateHash {
    size_t operator()(const State& s) const;
  };

  std::shared_ptr<const Grammar> grammar_;
  std::vector<const Element*> flat_;          // by position; nullptr = end of an alternative
  std::vector<std::vector<int32_t>> starts_;  // by rule: the first position of each alternative
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_index_;  // (pos, parent) -> node id
  std::vector<State> states_;
  std::unordered_map<State, StateId, StateHash> state_index_;
  std::vector<std::array<StateId, 256>> transitions_;  // kUnknown until computed
  std::vector<std::vector<uint64_t>> masks_;            // by state; empty = not cached
  size_t mask_bytes_ = 0;
  StateId current_ = kDead;
  std::string consumed_;  // every byte advanced over, for replay after a trim
  std::vector<int32_t> seen_scratch_;
  bool too_ambiguous_ = false;
};

// Whether `text` is a whole sentence of `grammar` (tests and front ends' checks).
bool grammar_matches(const std::shared_ptr<const Grammar>& grammar, std::string_view text);

}  // namespace loragate::grammar
