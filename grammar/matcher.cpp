#include "grammar/matcher.h"

#include <algorithm>

namespace loragate::grammar {
namespace {

constexpr Automaton::StateId kUnknown = -2;
// The tables' budget: states (each with a 1 KiB transition row) and cached masks.
constexpr size_t kMaxStates = 8 * 1024;
constexpr size_t kMaxMaskBytes = 64u << 20;
// An ambiguous grammar (a request's own) can keep many parses alive at once;
// past this many stacks in one state the matcher gives up rather than let
// one byte cost seconds.
constexpr size_t kMaxStacksPerState = 512;

uint64_t node_key(int32_t pos, int32_t parent) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent);
}

}  // namespace

size_t Automaton::StateHash::operator()(const State& s) const {
  uint64_t h = 1469598103934665603ull;
  for (int32_t id : s) h = (h ^ static_cast<uint32_t>(id)) * 1099511628211ull;
  return static_cast<size_t>(h);
}

Automaton::Automaton(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  const auto& rules = grammar_->rules();
  starts_.resize(rules.size());
  for (size_t r = 0; r < rules.size(); ++r) {
    for (const Alternative& alt : rules[r].alternatives) {
      starts_[r].push_back(static_cast<int32_t>(flat_.size()));
      for (const Element& e : alt) flat_.push_back(&e);
      flat_.push_back(nullptr);
    }
  }
  reset();
  epoch_ = 0;
}

void Automaton::reset() {
  nodes_.clear();
  node_index_.clear();
  states_.clear();
  state_index_.clear();
  transitions_.clear();
  masks_.clear();
  mask_bytes_ = 0;
  ++epoch_;
  State start;
  std::vector<int32_t> seen;
  for (int32_t pos : starts_[static_cast<size_t>(grammar_->root())]) expand(intern(pos, kEmptyStack), start, seen);
  std::sort(start.begin(), start.end());
  start.erase(std::unique(start.begin(), start.end()), start.end());
  start_ = intern_state(std::move(start));
}

bool Automaton::over_budget() const { return states_.size() > kMaxStates || mask_bytes_ > kMaxMaskBytes; }

int32_t Automaton::intern(int32_t pos, int32_t parent) {
  const auto [it, inserted] = node_index_.try_emplace(node_key(pos, parent), static_cast<int32_t>(nodes_.size()));
  if (inserted) nodes_.push_back({pos, parent});
  return it->second;
}

Automaton::StateId Automaton::intern_state(State s) {
  if (s.empty()) return kDead;
  const auto [it, inserted] = state_index_.try_emplace(s, static_cast<StateId>(states_.size()));
  if (inserted) {
    states_.push_back(std::move(s));
    std::array<StateId, 256> row;
    row.fill(kUnknown);
    transitions_.push_back(row);
    masks_.emplace_back();
  }
  return it->second;
}

void Automaton::expand(int32_t id, State& out, std::vector<int32_t>& seen) {
  // Pop finished alternatives in a loop: a deep stack (nested JSON) may end many at once.
  while (id != kEmptyStack && flat_[static_cast<size_t>(nodes_[static_cast<size_t>(id)].pos)] == nullptr) {
    id = nodes_[static_cast<size_t>(id)].parent;
  }
  if (std::find(seen.begin(), seen.end(), id) != seen.end()) return;
  seen.push_back(id);
  if (id == kEmptyStack) {
    out.push_back(kEmptyStack);
    return;
  }
  const Node node = nodes_[static_cast<size_t>(id)];
  const Element& e = *flat_[static_cast<size_t>(node.pos)];
  if (e.kind == Element::Kind::kBytes) {
    out.push_back(id);
    return;
  }
  // Open the rule: its alternatives run on top of the caller's continuation.
  // A reference that ends its alternative continues straight with the parent
  // (a tail call), so x* = r ::= x r | "" keeps one stack depth however many
  // times it repeats, and comes back to the same state.
  const int32_t cont =
      flat_[static_cast<size_t>(node.pos) + 1] == nullptr ? node.parent : intern(node.pos + 1, node.parent);
  for (int32_t start : starts_[static_cast<size_t>(e.rule)]) expand(intern(start, cont), out, seen);
}

Automaton::State Automaton::step(const State& from, uint8_t byte) {
  State out;
  std::vector<int32_t>& seen = seen_scratch_;
  seen.clear();
  for (int32_t id : from) {
    if (id == kEmptyStack) continue;
    const Node node = nodes_[static_cast<size_t>(id)];
    if (!flat_[static_cast<size_t>(node.pos)]->bytes.test(byte)) continue;
    expand(intern(node.pos + 1, node.parent), out, seen);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.size() > kMaxStacksPerState) {
    too_ambiguous_ = true;
    out.clear();
  }
  return out;
}

Automaton::StateId Automaton::transition(StateId from, uint8_t byte) {
  StateId& known = transitions_[static_cast<size_t>(from)][byte];
  if (known != kUnknown) return known;
  State next = step(states_[static_cast<size_t>(from)], byte);  // copies: interning may grow states_
  const StateId id = intern_state(std::move(next));
  transitions_[static_cast<size_t>(from)][byte] = id;  // `known` may dangle after the push_back
  return id;
}

bool Automaton::accepts(StateId s) const {
  return s != kDead && states_[static_cast<size_t>(s)].front() == kEmptyStack;
}

bool Automaton::can_continue(StateId s) const {
  if (s == kDead) return false;
  const State& stacks = state(s);
  return std::any_of(stacks.begin(), stacks.end(), [](int32_t id) { return id != kEmptyStack; });
}

ByteSet Automaton::next_bytes(StateId s) const {
  ByteSet out;
  if (s == kDead) return out;
  for (int32_t id : state(s)) {
    if (id != kEmptyStack) out |= flat_[static_cast<size_t>(nodes_[static_cast<size_t>(id)].pos)]->bytes;
  }
  return out;
}

const std::vector<uint64_t>* Automaton::cached_mask(StateId s) const {
  const auto& m = masks_[static_cast<size_t>(s)];
  return m.empty() ? nullptr : &m;
}

void Automaton::cache_mask(StateId s, std::vector<uint64_t> mask) {
  mask_bytes_ += mask.size() * sizeof(uint64_t);
  masks_[static_cast<size_t>(s)] = std::move(mask);
}

// --- Matcher: a cursor.

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : Matcher(std::make_shared<Automaton>(std::move(grammar))) {}

Matcher::Matcher(std::shared_ptr<Automaton> automaton)
    : automaton_(std::move(automaton)), current_(automaton_->start()), epoch_(automaton_->epoch()) {}

void Matcher::sync() const {
  if (epoch_ == automaton_->epoch()) return;
  // Another cursor reset the automaton: walk the bytes again from the start
  // (they were accepted before, so they are again).
  StateId s = automaton_->start();
  for (char c : consumed_) s = automaton_->transition(s, static_cast<uint8_t>(c));
  current_ = s;
  epoch_ = automaton_->epoch();
}

Matcher::StateId Matcher::state_id() const {
  sync();
  return current_;
}

bool Matcher::advance(std::string_view bytes) {
  StateId s = state_id();
  for (char c : bytes) {
    s = automaton_->transition(s, static_cast<uint8_t>(c));
    if (s == kDead) return false;
  }
  current_ = s;
  consumed_.append(bytes);
  return true;
}

void Matcher::trim() {
  if (!automaton_->over_budget()) return;
  automaton_->reset();
  sync();
}

bool grammar_matches(const std::shared_ptr<const Grammar>& grammar, std::string_view text) {
  Matcher m(grammar);
  return m.advance(text) && m.accepts();
}

}  // namespace loragate::grammar
