#include "grammar/token_mask.h"

#include <algorithm>
#include <map>
#include <utility>

namespace loragate::grammar {
namespace {

constexpr size_t kMaxWalkStates = 64 * 1024;

}  // namespace

TokenVocabulary::TokenVocabulary(const std::vector<std::string>& bytes, const std::vector<bool>& special)
    : size_(static_cast<int32_t>(bytes.size())), bytes_(bytes) {
  // Sorted by bytes, tokens with a common prefix are neighbours: the trie is
  // built in one pass, each node's children in byte order.
  std::vector<int32_t> order;
  for (int32_t id = 0; id < size_; ++id) {
    if (!special[static_cast<size_t>(id)] && !bytes[static_cast<size_t>(id)].empty()) order.push_back(id);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes[static_cast<size_t>(a)] < bytes[static_cast<size_t>(b)];
  });
  trie_.emplace_back();  // the root
  std::vector<int32_t> path{0};  // path[d] = the node of the current token's first d bytes
  std::vector<int32_t> last_child{-1};
  std::string prev;
  std::vector<std::pair<int32_t, int32_t>> ends;  // (node, token), in order of node creation
  for (int32_t id : order) {
    const std::string& b = bytes[static_cast<size_t>(id)];
    size_t common = 0;
    while (common < b.size() && common < prev.size() && b[common] == prev[common]) ++common;
    path.resize(common + 1);
    last_child.resize(common + 1);
    for (size_t d = common; d < b.size(); ++d) {
      const auto node = static_cast<int32_t>(trie_.size());
      TrieNode n;
      n.byte = static_cast<uint8_t>(b[d]);
      trie_.push_back(n);
      TrieNode& parent = trie_[static_cast<size_t>(path[d])];
      if (last_child[d] < 0) {
        parent.first_child = node;
      } else {
        trie_[static_cast<size_t>(last_child[d])].next_sibling = node;
      }
      last_child[d] = node;
      path.push_back(node);
      last_child.push_back(-1);
    }
    ends.emplace_back(path.back(), id);
    prev = b;
  }
  // Equal byte strings end at one node; ends are grouped by node already (sorted order).
  std::stable_sort(ends.begin(), ends.end());
  for (size_t i = 0; i < ends.size();) {
    TrieNode& n = trie_[static_cast<size_t>(ends[i].first)];
    n.tokens_begin = static_cast<int32_t>(token_ids_.size());
    const int32_t node = ends[i].first;
    for (; i < ends.size() && ends[i].first == node; ++i) token_ids_.push_back(ends[i].second);
    n.tokens_end = static_cast<int32_t>(token_ids_.size());
  }
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::from_tokenizer(const Tokenizer& tokenizer) {
  const int32_t n = tokenizer.vocab_size();
  std::vector<std::string> bytes(static_cast<size_t>(n));
  std::vector<bool> special(static_cast<size_t>(n), false);
  for (int32_t id = 0; id < n; ++id) {
    bytes[static_cast<size_t>(id)] = tokenizer.token_bytes(id);
    special[static_cast<size_t>(id)] = tokenizer.is_special(id);
  }
  return std::make_shared<const TokenVocabulary>(bytes, special);
}

void compute_token_mask(Matcher& matcher, const TokenVocabulary& vocab, TokenMask* mask) {
  matcher.trim();  // between searches: state ids stay valid through this one
  const Matcher::StateId from = matcher.state_id();
  if (const TokenMask* cached = matcher.cached_mask(from)) {
    *mask = *cached;
    return;
  }
  mask->assign((static_cast<size_t>(vocab.size()) + 63) / 64, 0);
  const auto& trie = vocab.trie();
  const auto& ids = vocab.tokens();
  // Depth first over the trie, one memoised transition per edge.
  struct Frame {
    int32_t child;  // the next child of this frame's node to try
    Matcher::StateId state;
  };
  std::vector<Frame> stack;
  stack.push_back({trie[0].first_child, from});
  bool complete = true;
  while (!stack.empty()) {
    // A grammar that would need this many states for one step (each with a
    // 1 KiB row) is cut short: the tokens not reached stay out of the mask,
    // so what is generated still follows the grammar.
    if (matcher.num_states() > kMaxWalkStates) {
      complete = false;
      break;
    }
    Frame& top = stack.back();
    if (top.child < 0) {
      stack.pop_back();
      continue;
    }
    const TokenVocabulary::TrieNode& node = trie[static_cast<size_t>(top.child)];
    top.child = node.next_sibling;
    const Matcher::StateId next = matcher.transition(top.state, node.byte);
    if (next == Matcher::kDead) continue;  // no token below this prefix can follow
    for (int32_t i = node.tokens_begin; i < node.tokens_end; ++i) {
      const auto id = static_cast<uint32_t>(ids[static_cast<size_t>(i)]);
      (*mask)[id >> 6] |= uint64_t{1} << (id & 63);
    }
    if (node.first_child >= 0) stack.push_back({node.first_child, next});
  }
  if (complete) matcher.cache_mask(from, *mask);
}

}  // namespace loragate::grammar
