// Matcher: runs a Grammar as a pushdown automaton over bytes. Its state is
// the set of parse stacks still alive after the bytes seen so far; a stack
// is a list of "what comes next" positions, the innermost rule on top, kept
// as hash-consed nodes shared between stacks, so that equal stacks are one
// id and a state is a small sorted vector of ids. Speculative advances (the
// token-mask search tries every token of the vocabulary) roll back with
// checkpoint()/rollback(). Not thread-safe: one per sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace loragate::grammar {

class Matcher {
 public:
  using State = std::vector<int32_t>;  // sorted stack ids; -1 = the empty stack (accepted)

  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  const State& state() const { return state_; }
  // The bytes so far are a whole sentence of the grammar.
  bool accepts() const { return !state_.empty() && state_.front() == kEmptyStack; }
  // Some byte may follow the bytes so far.
  bool can_continue() const;
  // The bytes that may come next.
  ByteSet next_bytes() const;

  // Consumes bytes; all or nothing: false leaves the state as it was.
  bool advance(std::string_view bytes);
  // The state after one byte from `from` (empty when it cannot follow); does not change state().
  State step(const State& from, uint8_t byte);
  void set_state(State s) { state_ = std::move(s); }

  // Stack nodes made after a checkpoint are dropped by rollback() (states made
  // since then become invalid); used around speculative searches.
  size_t checkpoint() const { return nodes_.size(); }
  void rollback(size_t mark);
  size_t num_nodes() const { return nodes_.size(); }

  const Grammar& grammar() const { return *grammar_; }

  static constexpr int32_t kEmptyStack = -1;

 private:
  // The grammar flattened: each alternative's elements in a row, then an end
  // marker (nullptr); a position is an index into it.
  struct Node {
    int32_t pos;     // the next thing to match in some alternative
    int32_t parent;  // the stack below (whose top is where the caller goes on); kEmptyStack at the bottom
  };
  // The id of the stack (pos, parent), made if new.
  int32_t intern(int32_t pos, int32_t parent);
  // Adds to `out` every stack that stack `id` expands to whose top is a byte
  // set, or the empty stack: rule references are opened and finished
  // alternatives popped. `seen` (cleared by the caller per step) stops repeats.
  void expand(int32_t id, State& out, std::vector<int32_t>& seen);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<const Element*> flat_;            // by position; nullptr = end of an alternative
  std::vector<std::vector<int32_t>> starts_;    // by rule: the first position of each alternative
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> index_;  // (pos, parent) -> node id
  std::vector<int32_t> seen_scratch_;
  State state_;
};

// Whether `text` is a whole sentence of `grammar` (tests and front ends' checks).
bool grammar_matches(const std::shared_ptr<const Grammar>& grammar, std::string_view text);

}  // namespace loragate::grammar
