// POST /v1/completions: a prompt (text, or token ids) in, a text completion
// out, whole or as server-sent events.
//
//   {"id":"cmpl-…","object":"text_completion","created":…,"model":…,
//    "choices":[{"index":0,"text":…,"finish_reason":"length"|"stop","logprobs":null}],
//    "usage":{"prompt_tokens","completion_tokens","total_tokens"}}
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"
#include "gateway/openai_request.h"
#include "gateway/response_format.h"

namespace loragate {

class CompletionFormat final : public ResponseFormat {
 public:
  // `tokenizer` renders logprobs (when the result has them); may be null.
  explicit CompletionFormat(CompletionMeta meta, const Tokenizer* tokenizer = nullptr)
      : meta_(std::move(meta)), tokenizer_(tokenizer) {}
  nlohmann::json full(const GenerationResult& result) const override;
  nlohmann::json delta(std::string_view text) const override;
  nlohmann::json finish(std::string_view text, std::string_view finish_reason) const override;
  nlohmann::json usage(const GenerationResult& result) const override;

 private:
  nlohmann::json chunk(nlohmann::json choices) const;
  CompletionMeta meta_;
  const Tokenizer* tokenizer_;
};

// `prompt`: a string, a list of one string, a list of token ids, or a list of
// one list of token ids. Text is encoded with special tokens (BOS).
std::optional<ApiError> read_completion_prompt(const nlohmann::json& body, const Tokenizer* tokenizer,
                                               std::vector<int32_t>* prompt_ids);

void handle_completions(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange);

}  // namespace loragate
