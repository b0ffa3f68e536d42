// POST /v1/completions: a prompt (text, or token ids) in, a text completion
// out, whole or as server-sent events. A list of prompts and `n` give one
// choice per prompt and n: choice p * n + j is prompt p's j-th (seed + j).
//
//   {"id":"cmpl-…","object":"text_completion","created":…,"model":…,
//    "system_fingerprint":"<base>-<sha8>",
//    "choices":[{"index":0,"text":…,"finish_reason":"length"|"stop","logprobs":null}],
//
// `echo: true` puts the prompt before the text (with `logprobs`, the prompt's
// tokens and their log-probabilities come first, the first one null): with
// `max_tokens: 0` that scores a given text, OpenAI's legacy way. vLLM's
// `prompt_logprobs: k` adds each prompt token's logprob and k alternatives.
//    "usage":{"prompt_tokens","completion_tokens","total_tokens"}}
//
// A text prompt longer than the model length can hold is refused (400,
// context_length_exceeded) before it is tokenised; a long one is parsed and
// tokenised on the Gateway's BlockingWork, not on a network thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/openai/openai_request.h"
#include "gateway/openai/response_format.h"
#include "tokenizer/tokenizer.h"

namespace loragate {

// What a completion's answer carries besides the generated text.
struct CompletionExtras {
  int32_t n = 1;                         // choices per prompt (choice p * n + j is prompt p's j-th)
  bool echo = false;                     // the prompt comes first in text (and in logprobs)
  std::vector<std::string> prompt_texts; // what echo prepends, one per prompt
  bool vllm_prompt_logprobs = false;     // choices[i].prompt_logprobs
};

class CompletionFormat final : public ResponseFormat {
 public:
  // `tokenizer` renders logprobs (when the result has them); may be null.
  explicit CompletionFormat(CompletionMeta meta, const Tokenizer* tokenizer = nullptr, CompletionExtras extras = {})
      : meta_(std::move(meta)), tokenizer_(tokenizer), extras_(std::move(extras)) {}
  nlohmann::json full(const std::vector<GenerationResult>& results) const override;
  std::vector<nlohmann::json> delta(int32_t index, std::string_view text) override;
  std::vector<nlohmann::json> finish(int32_t index, std::string_view text, std::string_view finish_reason) override;
  nlohmann::json usage(const std::vector<GenerationResult>& results) const override;

 private:
  nlohmann::json chunk(nlohmann::json choices) const;
  nlohmann::json choice(int32_t index, const GenerationResult& result) const;
  CompletionMeta meta_;
  const Tokenizer* tokenizer_;
  CompletionExtras extras_;
};

// A completion's prompt as sent: text, or token ids.
struct CompletionPrompt {
  std::optional<std::string> text;  // encoded with special tokens (BOS)
  std::vector<int32_t> ids;         // the prompt when there is no text
};

// The most prompts one request may list, and the most sequences (prompts
// times n) it may run.
inline constexpr size_t kMaxPrompts = 64;
inline constexpr int64_t kMaxSequences = 128;

// `prompt`: a string, a list of strings, a list of token ids, or a list of
// lists of token ids; one CompletionPrompt per prompt, at most kMaxPrompts.
std::optional<ApiError> read_completion_prompts(const nlohmann::json& body, std::vector<CompletionPrompt>* prompts);

void handle_completions(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange);

}  // namespace loragate
