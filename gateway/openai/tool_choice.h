// `tools`, `tool_choice` and `parallel_tool_calls` of a chat request: which
// functions the model may call, and how its output is read back.
//   none      the output is content (the tools still reach the chat template);
//   auto      the model decides, in its chat template's tool format: the
//             syntax is picked from the template (<tool_call> blocks:
//             Hermes/Qwen; <|start_header_id|> with "parameters": Llama 3
//             JSON) or set by server.tool_call_parser; a template with
//             neither gives plain content;
//   required  the output is constrained to a JSON list of calls, each
//             {"name": one of the tools, "arguments": its parameter schema};
//   {"type": "function", "function": {"name": F}}
//             the output is constrained to F's parameter schema: the whole
//             output is F's arguments.
// The last two work on any model, whatever its template knows of tools.
// `parallel_tool_calls: false` allows one call. Errors are 400s naming the
// field (tools[i].function.parameters for a schema that cannot be compiled).
// Thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "gateway/openai/openai_errors.h"
#include "gateway/openai/tool_call_parser.h"
#include "grammar/grammar.h"

namespace loragate {

// The most tools one request may list.
inline constexpr size_t kMaxTools = 128;

// How a chat request's output is read back, and what constrains it.
struct ToolChoice {
  ToolCallSyntax syntax = ToolCallSyntax::kNone;
  std::string function;                             // kArguments: the named function
  std::shared_ptr<const grammar::Grammar> grammar;  // required / named: the calls' grammar
};

// `auto`'s syntax for `chat_template` under server.tool_call_parser (server_options.h).
ToolCallSyntax auto_tool_syntax(const ChatTemplate& chat_template, std::string_view tool_call_parser);

// Reads the request's tools and tool_choice into *out. `raw_body` is the
// body's text (parameter schemas are re-read from it in their written key
// order, so arguments come out in that order).
std::optional<ApiError> read_tool_choice(const nlohmann::json& body, std::string_view raw_body,
                                         const ChatTemplate& chat_template, std::string_view tool_call_parser,
                                         ToolChoice* out);

}  // namespace loragate
