#include "grammar/matcher.h"

#include <algorithm>

namespace loragate::grammar {
namespace {

uint64_t node_key(int32_t pos, int32_t parent) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent);
}

void sort_unique(Matcher::State& s) {
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
}

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  const auto& rules = grammar_->rules();
  starts_.resize(rules.size());
  for (size_t r = 0; r < rules.size(); ++r) {
    for (const Alternative& alt : rules[r].alternatives) {
      starts_[r].push_back(static_cast<int32_t>(flat_.size()));
      for (const Element& e : alt) flat_.push_back(&e);
      flat_.push_back(nullptr);
    }
  }
  std::vector<int32_t> seen;
  for (int32_t start : starts_[static_cast<size_t>(grammar_->root())]) {
    expand(intern(start, kEmptyStack), state_, seen);
  }
  sort_unique(state_);
}

int32_t Matcher::intern(int32_t pos, int32_t parent) {
  const auto [it, inserted] = index_.try_emplace(node_key(pos, parent), static_cast<int32_t>(nodes_.size()));
  if (inserted) nodes_.push_back({pos, parent});
  return it->second;
}

void Matcher::expand(int32_t id, State& out, std::vector<int32_t>& seen) {
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
  const int32_t cont = intern(node.pos + 1, node.parent);
  for (int32_t start : starts_[static_cast<size_t>(e.rule)]) expand(intern(start, cont), out, seen);
}

Matcher::State Matcher::step(const State& from, uint8_t byte) {
  State out;
  std::vector<int32_t>& seen = seen_scratch_;
  seen.clear();
  for (int32_t id : from) {
    if (id == kEmptyStack) continue;
    const Node node = nodes_[static_cast<size_t>(id)];
    if (!flat_[static_cast<size_t>(node.pos)]->bytes.test(byte)) continue;
    expand(intern(node.pos + 1, node.parent), out, seen);
  }
  sort_unique(out);
  return out;
}

bool Matcher::advance(std::string_view bytes) {
  State s = state_;
  for (char c : bytes) {
    s = step(s, static_cast<uint8_t>(c));
    if (s.empty()) return false;
  }
  state_ = std::move(s);
  return true;
}

bool Matcher::can_continue() const {
  return std::any_of(state_.begin(), state_.end(), [](int32_t id) { return id != kEmptyStack; });
}

ByteSet Matcher::next_bytes() const {
  ByteSet out;
  for (int32_t id : state_) {
    if (id != kEmptyStack) out |= flat_[static_cast<size_t>(nodes_[static_cast<size_t>(id)].pos)]->bytes;
  }
  return out;
}

void Matcher::rollback(size_t mark) {
  while (nodes_.size() > mark) {
    const Node& n = nodes_.back();
    index_.erase(node_key(n.pos, n.parent));
    nodes_.pop_back();
  }
}

bool grammar_matches(const std::shared_ptr<const Grammar>& grammar, std::string_view text) {
  Matcher m(grammar);
  return m.advance(text) && m.accepts();
}

}  // namespace loragate::grammar
