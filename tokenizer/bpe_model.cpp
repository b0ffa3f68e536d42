#include "tokenizer/bpe_model.h"

#include <cstdio>
#include <queue>

namespace loragate::tok {

Result<std::unique_ptr<BpeModel>> BpeModel::load(const Json& model, BpeTables tables, const std::string& where) {
  std::unique_ptr<BpeModel> m(new BpeModel());
  auto dropout = model.find("dropout");
  if (dropout != model.end() && !dropout->is_null() && (!dropout->is_number() || dropout->get<double>() != 0.0)) {
    return Status::unsupported(json_key(where, "dropout") + ": BPE dropout is not supported");
  }
  LG_ASSIGN_OR_RETURN(m->byte_fallback_, json_bool_or(model, "byte_fallback", false, where));
  LG_ASSIGN_OR_RETURN(m->fuse_unk_, json_bool_or(model, "fuse_unk", false, where));
  LG_ASSIGN_OR_RETURN(m->ignore_merges_, json_bool_or(model, "ignore_merges", false, where));
  LG_ASSIGN_OR_RETURN(m->continuing_subword_prefix_, json_string_or(model, "continuing_subword_prefix", "", where));
  LG_ASSIGN_OR_RETURN(m->end_of_word_suffix_, json_string_or(model, "end_of_word_suffix", "", where));

  // Vocabulary: ids index a vector; the hash map holds views into it, so the
  // vector is filled completely before the map is built.
  if (!tables.has_vocab) return json_corrupt(json_key(where, "vocab"), "missing or not an object");
  if (!tables.has_merges) return json_corrupt(json_key(where, "merges"), "missing or not an array");
  int64_t max_id = -1;
  for (const auto& [token, id] : tables.vocab) max_id = std::max(max_id, id);
  if (max_id > 16 * static_cast<int64_t>(tables.vocab.size()) + 1024) {
    return json_corrupt(json_key(where, "vocab"), "ids are far sparser than the vocabulary (largest id " +
                                                      std::to_string(max_id) + ")");
  }
  m->id_to_token_.resize(static_cast<size_t>(max_id + 1));
  m->has_id_.assign(static_cast<size_t>(max_id + 1), false);
  for (auto& [token, id] : tables.vocab) {
    m->id_to_token_[static_cast<size_t>(id)] = std::move(token);
    m->has_id_[static_cast<size_t>(id)] = true;
  }
  m->vocab_.reserve(m->id_to_token_.size());
  for (size_t id = 0; id < m->id_to_token_.size(); ++id) {
    if (m->has_id_[id]) m->vocab_.emplace(m->id_to_token_[id], static_cast<int32_t>(id));
  }

  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto id = m->token_to_id(name);
    m->byte_ids_[static_cast<size_t>(b)] = id ? *id : -1;
  }
  LG_ASSIGN_OR_RETURN(std::string unk, json_string_or(model, "unk_token", "", where));
  if (!unk.empty()) {
    m->unk_id_ = m->token_to_id(unk);
    if (!m->unk_id_) return json_corrupt(json_key(where, "unk_token"), "'" + unk + "' is not in the vocab");
  }

  // Merges arrive as (left, right) pairs whichever form the file used.
  m->merges_.reserve(tables.merges.size());
  const size_t prefix_len = m->continuing_subword_prefix_.size();
  std::string merged;
  for (size_t i = 0; i < tables.merges.size(); ++i) {
    const std::string& a = tables.merges[i].first;
    const std::string& b = tables.merges[i].second;
    auto a_id = m->token_to_id(a);
    auto b_id = m->token_to_id(b);
    if (!a_id || !b_id) {
      return json_corrupt(json_key(where, "merges[" + std::to_string(i) + "]"),
                          "token '" + (a_id ? b : a) + "' is not in the vocab");
    }
    // The right part loses its continuing-subword prefix when merged.
    merged.assign(a);
    merged.append(b, std::min(prefix_len, b.size()));
    auto new_id = m->token_to_id(merged);
    if (!new_id) {
      return json_corrupt(json_key(where, "merges[" + std::to_string(i) + "]"),
                          "merged token '" + merged + "' is not in the vocab");
    }
    // A repeated pair takes its last rank, as HF's HashMap collect does.
    m->merges_[pair_key(*a_id, *b_id)] = Merge{static_cast<uint32_t>(i), *new_id};
  }
  return m;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_id_[static_cast<size_t>(id)]) return nullptr;
  return &id_to_token_[static_cast<size_t>(id)];
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    // A piece that is itself a token is kept whole (Llama 3).
    if (auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  merge_word(word, out);
}

namespace {
size_t char_len(uint8_t lead) { return lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2; }
}  // namespace

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // linked list over symbols; -1 at the ends
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&](int32_t id) {
    int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, -1, true});
    if (index > 0) symbols[static_cast<size_t>(index - 1)].next = index;
  };

  // Characters to initial symbols. An unknown character becomes <unk> (runs
  // fused with fuse_unk) unless its bytes all have <0xNN> tokens. As in HF, a
  // pending <unk> is only written when the next known character arrives.
  int32_t pending_unk = -1;
  std::string piece;
  for (size_t i = 0; i < word.size();) {
    size_t len = std::min(char_len(static_cast<uint8_t>(word[i])), word.size() - i);
    bool is_first = i == 0, is_last = i + len == word.size();
    piece.clear();
    if (!is_first) piece += continuing_subword_prefix_;
    piece.append(word.substr(i, len));
    if (is_last) piece += end_of_word_suffix_;
    i += len;
    if (auto id = token_to_id(piece)) {
      if (pending_unk >= 0) add(pending_unk);
      pending_unk = -1;
      add(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char c : piece) all = all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        for (char c : piece) add(byte_ids_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk >= 0 && !fuse_unk_) add(pending_unk);
      pending_unk = *unk_id_;
    }
  }
  if (pending_unk >= 0) add(pending_unk);

  // Merge by rank: always the lowest-ranked pair, leftmost on ties. Stale
  // queue entries are recognised by re-looking up the pair.
  struct Candidate {
    uint32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator<(const Candidate& o) const {  // priority_queue pops the "largest"
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<Candidate> initial;
  initial.reserve(symbols.size());
  for (size_t k = 0; k + 1 < symbols.size(); ++k) {
    if (const Merge* mg = find_merge(symbols[k].id, symbols[k + 1].id)) {
      initial.push_back({mg->rank, static_cast<int32_t>(k), mg->new_id});
    }
  }
  std::priority_queue<Candidate> queue(std::less<Candidate>(), std::move(initial));
  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    const Merge* mg = find_merge(left.id, right.id);
    if (!mg || mg->new_id != top.new_id) continue;
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) {
      if (const Merge* p = find_merge(symbols[static_cast<size_t>(left.prev)].id, left.id)) {
        queue.push({p->rank, left.prev, p->new_id});
      }
    }
    if (left.next >= 0) {
      if (const Merge* n = find_merge(left.id, symbols[static_cast<size_t>(left.next)].id)) {
        queue.push({n->rank, top.pos, n->new_id});
      }
    }
  }
  for (const Symbol& s : symbols) {
    if (s.alive) out.push_back(s.id);
  }
}

}  // namespace loragate::tok
