// JSON Schema -> Grammar (issue 24's response_format / guided_json / tool
// parameters, all request input): compile_json_schema() on any JSON,
// including allOf merging, oneOf disjointness, number ranges, multipleOf and
// formats. A schema must compile or be refused with an error, never crash or
// hang; when it compiles, compiling again gives the same grammar, and a walk
// through it (bytes picked by the input) that ends where the grammar accepts
// has written well-formed JSON.
//
// Input: the schema as JSON text; its bytes also pick the walk's path.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"

using namespace loragate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  auto compiled = grammar::compile_json_schema(schema, {});
  if (!compiled.is_ok()) return 0;
  auto again = grammar::compile_json_schema(schema, {});
  if (!again.is_ok() || again->dump() != compiled->dump()) __builtin_trap();

  grammar::Matcher m(std::make_shared<const grammar::Grammar>(std::move(compiled).value()));
  std::string written;
  for (size_t step = 0; step < 512 && m.state().size() <= 256; ++step) {
    const uint8_t pick = size == 0 ? 0 : data[step % size];
    // Stop where the grammar accepts when the input says so, or must.
    if (m.accepts() && (pick % 4 == 0 || !m.can_continue())) {
      if (!nlohmann::json::accept(written)) __builtin_trap();  // a sentence that is not JSON
      return 0;
    }
    const grammar::ByteSet next = m.next_bytes();
    if (next.none()) __builtin_trap();  // a dead end that is not a sentence
    size_t skip = pick % next.count();
    int byte = 0;
    for (; byte < 256; ++byte) {
      if (next.test(static_cast<size_t>(byte)) && skip-- == 0) break;
    }
    if (!m.advance(std::string(1, static_cast<char>(byte)))) __builtin_trap();
    written += static_cast<char>(byte);
  }
  return 0;
}
