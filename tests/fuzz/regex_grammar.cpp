// Regular expressions (issue 24's guided_regex and JSON Schema's pattern):
// compile_regex() — escapes, classes, groups, quantifiers, the refused
// constructs, UTF-8, the limits; then, when it compiles, the dump is stable
// and a walk through the grammar with the Matcher agrees with itself
// (tests/fuzz/grammar_walk.h).
//
// Input: the pattern; its bytes also pick the walk's path.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "grammar/regex_grammar.h"
#include "tests/fuzz/grammar_walk.h"

using namespace loragate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view pattern(reinterpret_cast<const char*>(data), size);
  auto compiled = grammar::compile_regex(pattern);
  if (!compiled.is_ok()) return 0;
  auto again = grammar::compile_regex(pattern);
  if (!again.is_ok() || again->dump() != compiled->dump()) __builtin_trap();
  fuzz::walk_grammar(std::make_shared<const grammar::Grammar>(std::move(compiled).value()), pattern);
  return 0;
}
