// Tool calls read back out of generated text, whole or as it streams. One
// scanner per choice takes the text piece by piece and tells content apart
// from calls in the syntax the request was generated in:
//   kArguments   a named tool_choice: the whole output is the call's arguments
//                (constrained to the function's parameter schema);
//   kJsonList    tool_choice "required": [{"name":"f","arguments":{...}},...]
//                in compact JSON (constrained, see tool_choice.h);
//   kHermes      `auto` with a Hermes/Qwen template: calls are
//                <tool_call>{"name": ..., "arguments": {...}}</tool_call>
//                blocks, text around them is content;
//   kLlama3Json  `auto` with a Llama 3 template: the output is one or more
//                {"name": ..., "parameters": {...}} objects separated by ';'
//                (optionally after <|python_tag|>), else it is content.
// Streams and whole responses come from the same events, so they agree.
// Text the syntax cannot read as a call (a Hermes block that is not JSON)
// comes back as content: nothing generated is dropped.
// Not thread-safe: one scanner per choice, used on the exchange's strand.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loragate {

enum class ToolCallSyntax { kNone, kArguments, kJsonList, kHermes, kLlama3Json };

// One piece of what the scanner read: content text, the start of call
// `call` (its function name), or more of that call's arguments.
struct ToolCallEvent {
  enum class Kind { kContent, kCallBegin, kArguments };
  Kind kind = Kind::kContent;
  int32_t call = 0;  // kCallBegin / kArguments: the call's index in the choice
  std::string text;  // content, the function name, or an arguments fragment
};

// The brackets and strings of JSON text read byte by byte.
struct JsonNesting {
  int32_t depth = 0;  // brackets open outside strings
  bool in_string = false;
  bool escaped = false;
  void read(char c);
  // `c` would close a bracket opened before reading began.
  bool closes_outer(char c) const { return !in_string && depth == 0 && (c == '}' || c == ']'); }
};

class ToolCallScanner {
 public:
  // `function`: the named function of kArguments (unused otherwise).
  ToolCallScanner(ToolCallSyntax syntax, std::string function);

  // More generated text; the events it completes (text that may still turn
  // out to be part of a call is held back).
  std::vector<ToolCallEvent> feed(std::string_view text);
  // The output is over: whatever was held back, as calls or content.
  std::vector<ToolCallEvent> finish();
  // Calls begun so far.
  int32_t calls() const { return calls_; }

 private:
  void feed_arguments(std::string_view text, std::vector<ToolCallEvent>* out);
  void feed_json_list(std::string_view text, std::vector<ToolCallEvent>* out);
  void feed_hermes(std::string_view text, std::vector<ToolCallEvent>* out);
  void feed_llama3(std::string_view text, std::vector<ToolCallEvent>* out);
  void emit_content(std::string text, std::vector<ToolCallEvent>* out);
  // A whole call read from JSON `{"name": ..., <args_key>: ...}`; false when it is not one.
  bool emit_json_call(std::string_view json_text, std::vector<ToolCallEvent>* out);

  const ToolCallSyntax syntax_;
  const std::string function_;
  int32_t calls_ = 0;
  bool finished_ = false;
  std::string held_;  // text not yet given out (a possible marker, a call being read)
  bool in_call_ = false;      // kHermes: inside <tool_call>
  bool after_call_ = false;   // kHermes: a call was just read (blanks next are layout)
  std::string blank_before_;  // kHermes: the blanks before the block being read
  bool content_only_ = false;  // kLlama3Json / kJsonList: decided (or fell back to) plain content
  bool decided_ = false;       // kLlama3Json: the first non-blank text was seen
  // kJsonList: where in `[{"name":"N","arguments":ARGS},...]` the scanner is.
  enum class ListAt { kOpen, kCallHead, kName, kArgsHead, kArgs, kAfterCall, kDone } list_at_ = ListAt::kOpen;
  size_t matched_ = 0;  // bytes of the current fixed piece matched
  std::string name_;
  JsonNesting nesting_;  // kArgs: inside the arguments
};

// A choice's whole output read with `syntax`: its content (null when there
// is none beside calls) and its calls.
struct ToolCallOutput {
  struct Call {
    std::string name;
    std::string arguments;  // JSON text
  };
  std::optional<std::string> content;
  std::vector<Call> calls;
};
ToolCallOutput parse_tool_calls(ToolCallSyntax syntax, const std::string& function, std::string_view text);

// The events folded into an output (what parse_tool_calls returns).
void fold_tool_call_events(const std::vector<ToolCallEvent>& events, ToolCallOutput* out);

}  // namespace loragate
