#include "grammar/rule_writer.h"

#include <algorithm>

#include "common/utf8.h"

namespace loragate::grammar {
namespace {

// Which rules match at least one string.
std::vector<bool> writer_productive_rules(const std::vector<Rule>& rules) {
  std::vector<bool> productive(rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r) {
      if (productive[r]) continue;
      for (const Alternative& alt : rules[r].alternatives) {
        const bool all = std::all_of(alt.begin(), alt.end(), [&](const Element& e) {
          return e.kind == Element::Kind::kBytes || productive[static_cast<size_t>(e.rule)];
        });
        if (all) {
          productive[r] = changed = true;
          break;
        }
      }
    }
  }
  return productive;
}

}  // namespace

RuleWriter::RuleWriter(std::string what, RuleWriterLimits limits) : what_(std::move(what)), limits_(limits) {}

Status RuleWriter::too_large(const char* what) const {
  return Status::invalid_argument(what_ + ": the grammar is too large (over " + what + ")");
}

Result<int32_t> RuleWriter::add_rule(std::string_view name) {
  if (rules_.size() >= limits_.max_rules) return too_large((std::to_string(limits_.max_rules) + " rules").c_str());
  std::string unique(name);
  if (names_.count(unique) != 0) {
    int& next = next_suffix_[unique];
    do {
      unique = std::string(name) + "-" + std::to_string(++next);
    } while (names_.count(unique) != 0);
  }
  names_.insert(unique);
  rules_.push_back({std::move(unique), {}});
  if (!nullable_.empty()) nullable_.resize(rules_.size(), false);  // rules made by build() never match ""
  return static_cast<int32_t>(rules_.size() - 1);
}

Status RuleWriter::add_alternative(int32_t rule, Alternative alt) {
  elements_ += std::max<size_t>(alt.size(), 1);
  if (elements_ > limits_.max_elements) {
    return too_large((std::to_string(limits_.max_elements) + " elements").c_str());
  }
  rules_[static_cast<size_t>(rule)].alternatives.push_back(std::move(alt));
  return Status::ok();
}

Result<Element> RuleWriter::as_element(Alternative seq, std::string_view name) {
  if (seq.size() == 1) return seq.front();
  LG_ASSIGN_OR_RETURN(const int32_t r, add_rule(name));
  LG_RETURN_IF_ERROR(add_alternative(r, std::move(seq)));
  return Element::ref(r);
}

Result<Alternative> RuleWriter::repeat(const Element& x, int64_t min, int64_t max, std::string_view name) {
  if (min < 0 || min > limits_.max_repeat || max > limits_.max_repeat) {
    return Status::invalid_argument(what_ + ": repetition counts must lie in 0.." + std::to_string(limits_.max_repeat));
  }
  if (max >= 0 && min > max) return Status::invalid_argument(what_ + ": repetition {m,n} with m > n");
  // x{m,n} = x ... x (m times), then x* or a chain of nested optionals
  // o1 ::= x o2 | "" (linear in n - m).
  Alternative out(static_cast<size_t>(min), x);
  if (max < 0) {
    LG_ASSIGN_OR_RETURN(const int32_t star, add_rule(std::string(name) + "-star"));
    LG_RETURN_IF_ERROR(add_alternative(star, {x, Element::ref(star)}));
    LG_RETURN_IF_ERROR(add_alternative(star, {}));
    star_rules_.push_back(star);
    out.push_back(Element::ref(star));
  } else if (max > min) {
    int32_t tail = -1;
    for (int64_t i = min; i < max; ++i) {
      LG_ASSIGN_OR_RETURN(const int32_t opt, add_rule(std::string(name) + "-opt"));
      Alternative one{x};
      if (tail >= 0) one.push_back(Element::ref(tail));
      LG_RETURN_IF_ERROR(add_alternative(opt, std::move(one)));
      LG_RETURN_IF_ERROR(add_alternative(opt, {}));
      tail = opt;
    }
    out.push_back(Element::ref(tail));
  }
  return out;
}

Result<Element> RuleWriter::code_points(const CodePointRanges& ranges, bool negated, std::string_view name) {
  CodePointRanges sorted = ranges;
  std::sort(sorted.begin(), sorted.end());
  const bool ascii = std::all_of(sorted.begin(), sorted.end(), [](auto r) { return r.second < 0x80; });
  if (ascii && !negated) {
    ByteSet set;
    for (auto [lo, hi] : sorted) {
      for (char32_t c = lo; c <= hi; ++c) set.set(static_cast<size_t>(c));
    }
    if (set.any()) return Element::byte_set(set);
  }
  auto key = std::make_pair(sorted, negated);
  if (auto it = classes_.find(key); it != classes_.end()) return Element::ref(it->second);
  // GrammarBuilder splits the ranges into UTF-8 byte patterns; its rule is moved over.
  GrammarBuilder split;
  const int32_t from = split.code_points(sorted, negated, "class");
  LG_ASSIGN_OR_RETURN(const int32_t r, add_rule(name));
  for (Alternative& alt : split.rules()[static_cast<size_t>(from)].alternatives) {
    LG_RETURN_IF_ERROR(add_alternative(r, std::move(alt)));
  }
  classes_.emplace(std::move(key), r);
  return Element::ref(r);  // a class that matches nothing has no alternatives: build() drops it
}

Result<int32_t> RuleWriter::non_empty_rule(int32_t rule, std::vector<int32_t>& pending) {
  if (auto it = non_empty_.find(rule); it != non_empty_.end()) return it->second;
  LG_ASSIGN_OR_RETURN(const int32_t r, add_rule(rules_[static_cast<size_t>(rule)].name + "-nonempty"));
  non_empty_.emplace(rule, r);
  pending.push_back(rule);
  return r;
}

Status RuleWriter::rewrite_nullable_repeats() {
  // A nonempty string of e1 e2 ... en is a nonempty string of some e_i after
  // empty e1 .. e_(i-1), followed by anything of e_(i+1) .. en.
  std::vector<int32_t> pending;
  for (const int32_t star : star_rules_) {
    const Element x = rules_[static_cast<size_t>(star)].alternatives[0][0];
    if (x.kind != Element::Kind::kRule || !nullable_[static_cast<size_t>(x.rule)]) continue;
    LG_ASSIGN_OR_RETURN(const int32_t ne, non_empty_rule(x.rule, pending));
    rules_[static_cast<size_t>(star)].alternatives[0][0] = Element::ref(ne);
    while (!pending.empty()) {
      const int32_t from = pending.back();
      pending.pop_back();
      const int32_t to = non_empty_.at(from);
      const std::vector<Alternative> alts = rules_[static_cast<size_t>(from)].alternatives;
      for (const Alternative& alt : alts) {
        for (size_t i = 0; i < alt.size(); ++i) {
          const Element& e = alt[i];
          const bool e_nullable = e.kind == Element::Kind::kRule && nullable_[static_cast<size_t>(e.rule)];
          Alternative one;
          if (e_nullable) {
            LG_ASSIGN_OR_RETURN(const int32_t sub, non_empty_rule(e.rule, pending));
            one.push_back(Element::ref(sub));
          } else {
            one.push_back(e);
          }
          one.insert(one.end(), alt.begin() + static_cast<std::ptrdiff_t>(i) + 1, alt.end());
          LG_RETURN_IF_ERROR(add_alternative(to, std::move(one)));
          if (!e_nullable) break;
        }
      }
    }
  }
  return Status::ok();
}

Result<int32_t> RuleWriter::drop_unproductive(int32_t root) {
  const std::vector<bool> productive = writer_productive_rules(rules_);
  if (std::all_of(productive.begin(), productive.end(), [](bool p) { return p; })) return root;
  if (!productive[static_cast<size_t>(root)]) return Status::invalid_argument(what_ + ": the grammar matches no text");
  std::vector<int32_t> index(rules_.size(), -1);
  std::vector<Rule> kept;
  for (size_t r = 0; r < rules_.size(); ++r) {
    if (!productive[r]) continue;
    index[r] = static_cast<int32_t>(kept.size());
    kept.push_back(std::move(rules_[r]));
  }
  for (Rule& rule : kept) {
    std::erase_if(rule.alternatives, [&](const Alternative& alt) {
      return std::any_of(alt.begin(), alt.end(), [&](const Element& e) {
        return e.kind == Element::Kind::kRule && !productive[static_cast<size_t>(e.rule)];
      });
    });
    for (Alternative& alt : rule.alternatives) {
      for (Element& e : alt) {
        if (e.kind == Element::Kind::kRule) e.rule = index[static_cast<size_t>(e.rule)];
      }
    }
  }
  rules_ = std::move(kept);
  return index[static_cast<size_t>(root)];
}

Result<Grammar> RuleWriter::build(int32_t root) {
  nullable_ = nullable_rules(rules_);
  LG_RETURN_IF_ERROR(rewrite_nullable_repeats());
  LG_ASSIGN_OR_RETURN(const int32_t new_root, drop_unproductive(root));
  auto grammar = Grammar::make(std::move(rules_), new_root);
  if (!grammar.is_ok()) return Status::invalid_argument(what_ + ": " + grammar.status().message());
  return grammar;
}

void RuleWriter::append_utf8(char32_t c, std::string& out) { utf8_append(out, c); }

void RuleWriter::append_utf8(char32_t c, Alternative& out) {
  std::string bytes;
  append_utf8(c, bytes);
  for (char b : bytes) out.push_back(Element::byte(static_cast<uint8_t>(b)));
}

bool RuleWriter::decode_utf8(std::string_view text, size_t& pos, char32_t& out) {
  if (pos >= text.size()) return false;
  const auto b0 = static_cast<uint8_t>(text[pos]);
  size_t n = 0;
  char32_t c = 0;
  if (b0 < 0x80) {
    out = b0;
    ++pos;
    return true;
  }
  if ((b0 & 0xE0) == 0xC0) {
    n = 2;
    c = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3;
    c = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4;
    c = b0 & 0x07;
  } else {
    return false;
  }
  if (pos + n > text.size()) return false;
  for (size_t i = 1; i < n; ++i) {
    const auto b = static_cast<uint8_t>(text[pos + i]);
    if ((b & 0xC0) != 0x80) return false;
    c = (c << 6) | (b & 0x3F);
  }
  static constexpr char32_t kMinOfLength[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < kMinOfLength[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
  out = c;
  pos += n;
  return true;
}

}  // namespace loragate::grammar
