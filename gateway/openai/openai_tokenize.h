// vLLM's tokenizer routes, on POST and GET alike (a JSON body on both):
//
//   /tokenize    {"model", "prompt": "text", "add_special_tokens": true}
//             or {"model", "messages": [...], "add_generation_prompt": true,
//                 "add_special_tokens": false, "chat_template_kwargs", "tools"}
//                (+ "return_token_strs": true)
//             -> {"count": N, "max_model_len": L, "tokens": [ids]
//                 (, "token_strs": [vocabulary pieces])}
//   /detokenize  {"model", "tokens": [ids]} -> {"prompt": "text"}
//
// Messages are rendered exactly as /v1/chat/completions renders them
// (render_chat_prompt), so the ids equal the prompt a chat request runs.
// `model` and `scenario` resolve as on the completion routes (an unknown one
// is the same 404); every adapter shares its base's tokenizer. As in vLLM,
// text is tokenised whatever its length (the HTTP body limit bounds it), and
// decoding keeps special tokens. Nothing reaches the engine: both answer from
// the tokenizer, a large body off the network strand.
//
// Stateless: safe from any number of network threads at once.
#pragma once

#include <cstddef>
#include <memory>

#include "gateway/openai/openai_request.h"

namespace loragate {

// The most ids one /detokenize takes (more than any model's length the
// gateway serves; the body limit usually bounds it first).
inline constexpr size_t kMaxDetokenizeTokens = size_t{1} << 17;

void handle_tokenize(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange);
void handle_detokenize(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange);

}  // namespace loragate
