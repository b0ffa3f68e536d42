#include "grammar/grammar.h"

#include <algorithm>
#include <functional>

#include "common/utf8.h"

namespace loragate::grammar {
namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;
constexpr char32_t kSurrogateLo = 0xD800;
constexpr char32_t kSurrogateHi = 0xDFFF;

std::string byte_text(uint8_t b) {
  static const char* kHex = "0123456789abcdef";
  if (b >= 0x21 && b <= 0x7e && b != '\\' && b != ']' && b != '[' && b != '-' && b != '^' && b != '"') {
    return std::string(1, static_cast<char>(b));
  }
  return std::string("\\x") + kHex[b >> 4] + kHex[b & 15];
}

std::string set_text(const ByteSet& set) {
  std::string out = "[";
  for (int b = 0; b < 256;) {
    if (!set.test(static_cast<size_t>(b))) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && set.test(static_cast<size_t>(e + 1))) ++e;
    out += byte_text(static_cast<uint8_t>(b));
    if (e > b) out += "-" + byte_text(static_cast<uint8_t>(e));
    b = e + 1;
  }
  return out + "]";
}

// UTF-8 byte patterns for the code points [lo, hi] (same encoded length, no
// surrogates): each pattern is a sequence of byte ranges. The splitting is the
// classic one: cut where the encoded length changes, then wherever a
// continuation byte would not cover its whole range.
using BytePattern = std::vector<std::pair<uint8_t, uint8_t>>;

size_t encode_utf8(char32_t c, uint8_t* out) {
  std::string bytes;
  utf8_append(bytes, c);
  std::copy(bytes.begin(), bytes.end(), out);
  return bytes.size();
}

void utf8_patterns(char32_t lo, char32_t hi, std::vector<BytePattern>& out) {
  if (lo > hi) return;
  if (lo <= kSurrogateHi && hi >= kSurrogateLo) {
    if (lo < kSurrogateLo) utf8_patterns(lo, kSurrogateLo - 1, out);
    if (hi > kSurrogateHi) utf8_patterns(kSurrogateHi + 1, hi, out);
    return;
  }
  for (char32_t boundary : {char32_t{0x7F}, char32_t{0x7FF}, char32_t{0xFFFF}}) {
    if (lo <= boundary && hi > boundary) {
      utf8_patterns(lo, boundary, out);
      utf8_patterns(boundary + 1, hi, out);
      return;
    }
  }
  uint8_t a[4], b[4];
  const size_t n = encode_utf8(lo, a);
  encode_utf8(hi, b);
  for (size_t i = 1; i < n; ++i) {
    const char32_t m = (char32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_patterns(lo, lo | m, out);
        utf8_patterns((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_patterns(lo, (hi & ~m) - 1, out);
        utf8_patterns(hi & ~m, hi, out);
        return;
      }
    }
  }
  BytePattern p;
  for (size_t i = 0; i < n; ++i) p.emplace_back(a[i], b[i]);
  out.push_back(std::move(p));
}

}  // namespace

// A fixpoint over the alternatives.
std::vector<bool> nullable_rules(const std::vector<Rule>& rules) {
  std::vector<bool> nullable(rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r) {
      if (nullable[r]) continue;
      for (const Alternative& alt : rules[r].alternatives) {
        const bool all = std::all_of(alt.begin(), alt.end(), [&](const Element& e) {
          return e.kind == Element::Kind::kRule && nullable[static_cast<size_t>(e.rule)];
        });
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}


Result<Grammar> Grammar::make(std::vector<Rule> rules, int32_t root) {
  const auto count = static_cast<int32_t>(rules.size());
  if (root < 0 || root >= count) return Status::invalid_argument("grammar has no root rule");
  for (const Rule& r : rules) {
    if (r.alternatives.empty()) return Status::invalid_argument("grammar rule '" + r.name + "' has no alternatives");
    for (const Alternative& alt : r.alternatives) {
      for (const Element& e : alt) {
        if (e.kind == Element::Kind::kRule && (e.rule < 0 || e.rule >= count)) {
          return Status::invalid_argument("grammar rule '" + r.name + "' refers to a rule that does not exist");
        }
        if (e.kind == Element::Kind::kBytes && e.bytes.none()) {
          return Status::invalid_argument("grammar rule '" + r.name + "' has a character class that matches nothing");
        }
      }
    }
  }
  // Left recursion: rule A reaches rule B without consuming when B stands
  // after only nullable rules in one of A's alternatives; a cycle of such
  // edges would send a top-down matcher into an endless expansion.
  const std::vector<bool> nullable = nullable_rules(rules);
  std::vector<std::vector<int32_t>> first(rules.size());
  for (size_t r = 0; r < rules.size(); ++r) {
    for (const Alternative& alt : rules[r].alternatives) {
      for (const Element& e : alt) {
        if (e.kind != Element::Kind::kRule) break;
        first[r].push_back(e.rule);
        if (!nullable[static_cast<size_t>(e.rule)]) break;
      }
    }
  }
  std::vector<int> color(rules.size(), 0);  // 0 new, 1 on the path, 2 done
  std::vector<int32_t> path;
  std::string cycle;
  std::function<bool(int32_t)> visit = [&](int32_t r) {
    color[static_cast<size_t>(r)] = 1;
    path.push_back(r);
    for (int32_t next : first[static_cast<size_t>(r)]) {
      if (color[static_cast<size_t>(next)] == 1) {
        const auto from = std::find(path.begin(), path.end(), next);
        for (auto it = from; it != path.end(); ++it) cycle += rules[static_cast<size_t>(*it)].name + " -> ";
        cycle += rules[static_cast<size_t>(next)].name;
        return true;
      }
      if (color[static_cast<size_t>(next)] == 0 && visit(next)) return true;
    }
    path.pop_back();
    color[static_cast<size_t>(r)] = 2;
    return false;
  };
  for (int32_t r = 0; r < count; ++r) {
    if (color[static_cast<size_t>(r)] == 0 && visit(r)) {
      return Status::invalid_argument("grammar is left-recursive (" + cycle +
                                      "): rewrite it so each rule consumes a character before recursing");
    }
  }
  Grammar g;
  g.rules_ = std::move(rules);
  g.root_ = root;
  return g;
}

std::string Grammar::dump() const {
  std::string out;
  for (size_t r = 0; r < rules_.size(); ++r) {
    out += rules_[r].name + (static_cast<int32_t>(r) == root_ ? " (root)" : "") + " ::=";
    for (size_t a = 0; a < rules_[r].alternatives.size(); ++a) {
      if (a > 0) out += " |";
      const Alternative& alt = rules_[r].alternatives[a];
      if (alt.empty()) out += " \"\"";
      for (const Element& e : alt) {
        out += " ";
        out += e.kind == Element::Kind::kRule ? rules_[static_cast<size_t>(e.rule)].name : set_text(e.bytes);
      }
    }
    out += "\n";
  }
  return out;
}

int32_t GrammarBuilder::add_rule(std::string name) {
  const auto taken = [&](const std::string& n) {
    return std::any_of(rules_.begin(), rules_.end(), [&](const Rule& r) { return r.name == n; });
  };
  if (taken(name)) {
    for (int i = 1;; ++i) {
      const std::string candidate = name + "-" + std::to_string(i);
      if (!taken(candidate)) {
        name = candidate;
        break;
      }
    }
  }
  rules_.push_back({std::move(name), {}});
  return static_cast<int32_t>(rules_.size() - 1);
}

void GrammarBuilder::add_alternative(int32_t rule, Alternative alt) {
  rules_[static_cast<size_t>(rule)].alternatives.push_back(std::move(alt));
}

Alternative GrammarBuilder::literal(std::string_view bytes) {
  Alternative alt;
  for (char c : bytes) alt.push_back(Element::byte(static_cast<uint8_t>(c)));
  return alt;
}

int32_t GrammarBuilder::code_points(const std::vector<std::pair<char32_t, char32_t>>& ranges, bool negated,
                                    const std::string& name) {
  // Normalise to sorted, merged ranges, complemented when negated.
  std::vector<std::pair<char32_t, char32_t>> merged;
  auto sorted = ranges;
  std::sort(sorted.begin(), sorted.end());
  for (auto [lo, hi] : sorted) {
    hi = std::min(hi, kMaxCodePoint);
    if (lo > hi) continue;
    if (!merged.empty() && lo <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, hi);
    } else {
      merged.emplace_back(lo, hi);
    }
  }
  if (negated) {
    std::vector<std::pair<char32_t, char32_t>> complement;
    char32_t next = 0;
    for (auto [lo, hi] : merged) {
      if (lo > next) complement.emplace_back(next, lo - 1);
      next = hi + 1;
    }
    if (next <= kMaxCodePoint) complement.emplace_back(next, kMaxCodePoint);
    merged = std::move(complement);
  }
  std::vector<BytePattern> patterns;
  for (auto [lo, hi] : merged) utf8_patterns(lo, hi, patterns);
  const int32_t r = add_rule(name);
  ByteSet single;  // every one-byte pattern in one element
  for (const BytePattern& p : patterns) {
    if (p.size() == 1) {
      for (int b = p[0].first; b <= p[0].second; ++b) single.set(static_cast<size_t>(b));
      continue;
    }
    Alternative alt;
    for (auto [lo, hi] : p) {
      ByteSet s;
      for (int b = lo; b <= hi; ++b) s.set(static_cast<size_t>(b));
      alt.push_back(Element::byte_set(s));
    }
    add_alternative(r, std::move(alt));
  }
  if (single.any()) add_alternative(r, {Element::byte_set(single)});
  return r;
}

}  // namespace loragate::grammar
