// POST /v1/chat/completions: OpenAI messages rendered through the base
// model's chat template (with chat_template_kwargs as template variables),
// then generated like a completion; answered whole or as
// chat.completion.chunk events (the first delta of each choice carries the
// role). `n` choices are n sequences of the one prompt (seed + i for choice i).
// With tools (gateway/openai/tool_choice.h), each choice's output is read back as
// `message.tool_calls` (streamed as `delta.tool_calls` fragments, OpenAI's
// shape) and a choice that made calls finishes with "tool_calls".
// Messages with more text than the model length can hold are refused (400,
// context_length_exceeded) before rendering; a long chat is parsed, rendered
// and tokenised on the Gateway's BlockingWork, not on a network thread.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/openai/openai_request.h"
#include "gateway/openai/response_format.h"
#include "gateway/openai/tool_call_parser.h"

namespace loragate {

class ChatFormat final : public ResponseFormat {
 public:
  // `tokenizer` renders logprobs (when the result has them); may be null.
  // `n` choices, all of the one rendered prompt. `tools` says how output is
  // read back (kNone: all of it is content).
  explicit ChatFormat(CompletionMeta meta, const Tokenizer* tokenizer = nullptr, int32_t n = 1,
                      ToolCallSyntax tools = ToolCallSyntax::kNone, std::string function = "");
  nlohmann::json full(const std::vector<GenerationResult>& results) const override;
  std::vector<nlohmann::json> opening() const override;
  std::vector<nlohmann::json> delta(int32_t index, std::string_view text) override;
  std::vector<nlohmann::json> finish(int32_t index, std::string_view text, std::string_view finish_reason) override;
  nlohmann::json usage(const std::vector<GenerationResult>& results) const override;

 private:
  nlohmann::json chunk(int32_t index, nlohmann::json delta, nlohmann::json finish_reason) const;
  // The message of a finished choice: content, and tool_calls when it made some.
  nlohmann::json message(int32_t index, const ToolCallOutput& output) const;
  // Call `call` of choice `index`: an id unique to the response.
  std::string call_id(int32_t index, int32_t call) const;
  // Scanner events as chunks of choice `index`.
  std::vector<nlohmann::json> event_chunks(int32_t index, const std::vector<ToolCallEvent>& events) const;
  CompletionMeta meta_;
  const Tokenizer* tokenizer_;
  int32_t n_;
  ToolCallSyntax tools_;
  std::string function_;
  std::vector<ToolCallScanner> scanners_;  // per choice, streams only; empty without tools
};

// Checks `messages` (a non-empty list of {role, content} with string roles
// and string, null (assistant) or text-part contents) and returns them with
// every content flattened to a string; other message fields pass through.
std::optional<ApiError> read_chat_messages(const nlohmann::json& body, nlohmann::json* messages);

// `chat_template_kwargs` (an object) and `tools` (a list) of a chat body:
// the variables the chat template sees.
std::optional<ApiError> read_chat_template_vars(const nlohmann::json& body, nlohmann::json* vars);

// The tokenised prompt, or why there is none.
struct ChatPrompt {
  std::vector<int32_t> ids;
  std::optional<ApiError> error;
};

// `messages` (as read_chat_messages returns them) rendered with `base`'s chat
// template and `vars`, then encoded: the prompt /v1/chat/completions runs
// (and /tokenize counts). The template writes its own special tokens (BOS),
// so `add_special_tokens` is false there. `base` must have a tokenizer.
ChatPrompt render_chat_prompt(const ServingBase& base, const nlohmann::json& messages, bool add_generation_prompt,
                              const nlohmann::json& vars, bool add_special_tokens = false);

void handle_chat_completions(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange);

}  // namespace loragate
