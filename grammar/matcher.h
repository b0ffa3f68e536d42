// Matcher: runs a Grammar as a pushdown automaton over bytes, one cursor per
// sequence over an Automaton that many cursors of the one grammar may share.
//
// A parse stack is a list of "what comes next" positions, the innermost rule
// on top, kept as hash-consed nodes shared between stacks, so equal stacks
// are one id. An automaton state is the sorted set of stacks still alive;
// states are interned too, and every (state, byte) transition is remembered
// in a 256-entry row. The token-mask search walks the vocabulary's byte trie
// with these rows, so after the first walk from a context it is table
// lookups; inside a JSON string, for instance, most bytes lead back to the
// same state. A state's token mask is cached as well. Sequences that share
// an automaton (the engine gives every request of one compiled grammar the
// same) share all of this: the second request with a schema finds its
// contexts' transitions and masks ready. The tables are bounded: past the
// budget the automaton starts afresh, and each cursor replays the bytes it
// has consumed when it is next used.
// Not thread-safe: an automaton and its cursors belong to one thread (the
// engine's step loop).
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

class Automaton {
 public:
  using State = std::vector<int32_t>;  // sorted stack ids; -1 = the empty stack (accepted)
  using StateId = int32_t;
  static constexpr StateId kDead = -1;  // no stack survives
  static constexpr int32_t kEmptyStack = -1;

  explicit Automaton(std::shared_ptr<const Grammar> grammar);

  // The state before any byte.
  StateId start() const { return start_; }
  const State& state(StateId s) const { return states_[static_cast<size_t>(s)]; }
  bool accepts(StateId s) const;
  bool can_continue(StateId s) const;
  ByteSet next_bytes(StateId s) const;
  // The state after `byte` from state `from`, or kDead (memoised).
  StateId transition(StateId from, uint8_t byte);

  // A cached token mask per state (see token_mask.h), or nullptr.
  const std::vector<uint64_t>* cached_mask(StateId s) const;
  void cache_mask(StateId s, std::vector<uint64_t> mask);

  // The tables outgrew their budget: reset() before the next search.
  bool over_budget() const;
  // Starts afresh: every state id is forgotten (epoch() changes).
  void reset();
  // Counts the resets: a cursor whose epoch differs must replay its bytes.
  uint64_t epoch() const { return epoch_; }

  size_t num_states() const { return states_.size(); }
  // A step met more parses alive at once than the automaton follows (an
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
  StateId start_ = kDead;
  uint64_t epoch_ = 0;
  std::vector<int32_t> seen_scratch_;
  bool too_ambiguous_ = false;
};

// One sequence's position in an automaton: the state it is in, and the bytes
// it consumed (replayed when the automaton was reset under it).
class Matcher {
 public:
  using State = Automaton::State;
  using StateId = Automaton::StateId;
  static constexpr StateId kDead = Automaton::kDead;
  static constexpr int32_t kEmptyStack = Automaton::kEmptyStack;

  // Over an automaton of its own.
  explicit Matcher(std::shared_ptr<const Grammar> grammar);
  // Over a shared one.
  explicit Matcher(std::shared_ptr<Automaton> automaton);

  // The current state and its stacks.
  StateId state_id() const;
  const State& state() const { return automaton_->state(state_id()); }
  // The bytes so far are a whole sentence of the grammar.
  bool accepts() const { return automaton_->accepts(state_id()); }
  bool accepts(StateId s) const { return automaton_->accepts(s); }
  // Some byte may follow the bytes so far.
  bool can_continue() const { return automaton_->can_continue(state_id()); }
  // The bytes that may come next.
  ByteSet next_bytes() const { return automaton_->next_bytes(state_id()); }

  // Consumes bytes; all or nothing: false leaves the state as it was.
  bool advance(std::string_view bytes);
  StateId transition(StateId from, uint8_t byte) { return automaton_->transition(from, byte); }

  const std::vector<uint64_t>* cached_mask(StateId s) const { return automaton_->cached_mask(s); }
  void cache_mask(StateId s, std::vector<uint64_t> mask) { automaton_->cache_mask(s, std::move(mask)); }
  // Resets the automaton when its tables outgrew their budget (state ids
  // change: only between searches).
  void trim();

  size_t num_states() const { return automaton_->num_states(); }
  bool too_ambiguous() const { return automaton_->too_ambiguous(); }
  const Grammar& grammar() const { return automaton_->grammar(); }
  const std::shared_ptr<Automaton>& automaton() const { return automaton_; }

 private:
  // Replays the consumed bytes if the automaton was reset since this cursor last ran.
  void sync() const;

  std::shared_ptr<Automaton> automaton_;
  // Cursor state, brought up to date by sync() (hence mutable: reading the
  // state after another cursor reset the automaton replays).
  mutable StateId current_ = kDead;
  mutable uint64_t epoch_ = 0;
  std::string consumed_;  // every byte advanced over, for replay after a reset
};

// Whether `text` is a whole sentence of `grammar` (tests and front ends' checks).
bool grammar_matches(const std::shared_ptr<const Grammar>& grammar, std::string_view text);

}  // namespace loragate::grammar
