// GBNF grammars (issue 24's guided_grammar): parse_gbnf() — rules, groups,
// quantifiers, literals and classes with escapes, UTF-8, comments, the
// limits; then, when it parses, the dump is stable (parsing again gives the
// same rules) and a walk through the grammar with the Matcher agrees with
// itself (tests/fuzz/grammar_walk.h).
//
// Input: the grammar text; its bytes also pick the walk's path.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "grammar/gbnf.h"
#include "tests/fuzz/grammar_walk.h"

using namespace loragate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = grammar::parse_gbnf(text);
  if (!parsed.is_ok()) return 0;
  auto again = grammar::parse_gbnf(text);
  if (!again.is_ok() || again->dump() != parsed->dump()) __builtin_trap();
  fuzz::walk_grammar(std::make_shared<const grammar::Grammar>(std::move(parsed).value()), text);
  return 0;
}
