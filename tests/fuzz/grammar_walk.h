// A walk through a compiled grammar for the grammar fuzz targets: from the
// start, repeatedly take one of the bytes the Matcher says may come next
// (picked by `choices`), checking that the matcher agrees with itself:
// every byte next_bytes() offers advances, any other is refused and leaves
// the state as it was, and accepts() only ever holds where the walk may stop.
// The walk stops early once the state holds more than kMaxWalkStacks stacks:
// ambiguous grammars (nested repeats of nullable parts) grow the Matcher's
// state with every byte, which bounds on the Matcher itself must handle
// (FUZZING.md, Findings); these targets are about the front ends.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "grammar/matcher.h"

namespace loragate::fuzz {

inline constexpr size_t kMaxWalkStacks = 256;

inline void walk_grammar(const std::shared_ptr<const grammar::Grammar>& g, std::string_view choices) {
  grammar::Matcher m(g);
  std::string text;
  for (size_t step = 0; step < 64 && m.state().size() <= kMaxWalkStacks; ++step) {
    const grammar::ByteSet next = m.next_bytes();
    if (next.none()) {
      if (!m.accepts()) __builtin_trap();  // a dead end that is not a sentence
      break;
    }
    const size_t pick = step < choices.size() ? static_cast<uint8_t>(choices[step]) : step * 7;
    size_t k = pick % next.count();
    int byte = 0;
    while (!next.test(static_cast<size_t>(byte)) || k-- > 0) ++byte;
    // A byte that may not come next is refused, leaving the state as it was.
    for (int other = 0; other < 256; other += 37) {
      if (next.test(static_cast<size_t>(other))) continue;
      const grammar::Matcher::State before = m.state();
      const char c = static_cast<char>(other);
      if (m.advance(std::string_view(&c, 1)) || m.state() != before) __builtin_trap();
    }
    const char c = static_cast<char>(byte);
    if (!m.advance(std::string_view(&c, 1))) {
      if (m.too_ambiguous()) return;  // the matcher's own bound on parses alive at once
      __builtin_trap();
    }
    text += c;
  }
  if (m.accepts() && !grammar::grammar_matches(g, text)) __builtin_trap();
}

}  // namespace loragate::fuzz
