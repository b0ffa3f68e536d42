// Tool calls read back out of generated text (gateway/openai/tool_call_parser.h):
// every syntax on arbitrary text, fed in pieces of a size the input picks.
// The stream must fold to exactly what the whole text parses to (the
// guarantee that a streamed and a whole chat answer agree), and no content
// byte may be lost where no call was found.
//
// Input: byte 0 picks the syntax, byte 1 the piece size; the rest is the text.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gateway/openai/tool_call_parser.h"

using namespace loragate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const auto syntax = static_cast<ToolCallSyntax>(data[0] % 5);
  const size_t piece = 1 + data[1] % 16;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);

  const ToolCallOutput whole = parse_tool_calls(syntax, "f", text);
  ToolCallScanner scanner(syntax, "f");
  ToolCallOutput streamed;
  for (size_t at = 0; at < text.size(); at += piece) fold_tool_call_events(scanner.feed(text.substr(at, piece)), &streamed);
  fold_tool_call_events(scanner.finish(), &streamed);

  if (streamed.calls.size() != whole.calls.size()) __builtin_trap();
  for (size_t k = 0; k < whole.calls.size(); ++k) {
    if (streamed.calls[k].name != whole.calls[k].name || streamed.calls[k].arguments != whole.calls[k].arguments) {
      __builtin_trap();
    }
  }
  if (streamed.content.value_or("") != whole.content.value_or("") && !(whole.calls.size() > 0 && !whole.content)) {
    __builtin_trap();
  }
  // Without calls, the content is the text itself (Hermes and JSON-list text included).
  if (whole.calls.empty() && whole.content != text) __builtin_trap();
  return 0;
}
