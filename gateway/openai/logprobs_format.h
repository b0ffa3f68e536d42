// The OpenAI shapes of per-token log-probabilities, built from a finished
// generation's TokenLogprobs:
//
//   completions: {"tokens": [...], "token_logprobs": [...],
//                 "top_logprobs": [{text: logprob, ...}, ...], "text_offset": [...]}
//                (with echo, the prompt's tokens come first; those without a
//                logprob, like the first, have null)
//   vLLM's prompt_logprobs: [null, {"<id>": {"logprob", "rank", "decoded_token"}, ...}, ...]
//   chat:        {"content": [{"token", "logprob", "bytes",
//                              "top_logprobs": [{"token", "logprob", "bytes"}]}]}
//
// A token's text is what it adds after the tokens before it, so pieces
// concatenate to the generated text (a SentencePiece "▁the" reads " the").
#pragma once

#include <nlohmann/json.hpp>

#include "engine/api.h"
#include "tokenizer/tokenizer.h"

namespace loragate {

nlohmann::json completion_logprobs(const Tokenizer& tokenizer, const GenerationResult& result, bool echo_prompt);
nlohmann::json vllm_prompt_logprobs(const Tokenizer& tokenizer, const GenerationResult& result);
nlohmann::json chat_logprobs(const Tokenizer& tokenizer, const GenerationResult& result);

}  // namespace loragate
