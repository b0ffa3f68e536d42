// One {"messages": [...]} training line as tokens with a loss mask: the
// conversation rendered with the model's chat template, the loss on each
// assistant turn. Used by load_train_data (train_data.h).
//
// Which tokens are an assistant turn's: render the conversation before the
// turn with the generation prompt (P) and through the turn (F); the turn is
// the tokens of F past those of P. Both token sequences must be prefixes of
// the whole conversation's, else the template renders a turn differently
// once more follows and no token can be called the turn's: the line is
// refused. Rendered text holds the template's special tokens (BOS
// included), so it is encoded without adding any, as the chat endpoint does.
//
// The end of a turn: the template's end-of-turn token (<|im_end|>,
// <|eot_id|>, </s>, <end_of_turn>) is learnt, so that the model learns to
// stop; what the template writes after it (ChatML's "\n") is not. That is
// what HF's assistant_tokens_mask ({% generation %} blocks) and TRL's
// assistant_only_loss mark. Precisely: a turn's span keeps its tokens up to
// and including its last special token (Tokenizer::is_special); a span with
// no special token (the plain fallback, "assistant: ...\n") is kept whole.
//
// Stateless functions; safe from many threads on a shared tokenizer and template.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "common/status.h"
#include "tokenizer/tokenizer.h"
#include "trainer/train_data.h"

namespace loragate::train {

// `messages`: the line's list of {"role", "content"} objects (content a
// string; other keys are passed to the template as given). Errors name the
// message by index ("messages[2].content") but never quote it; the caller
// adds the file and line. Refuses a conversation over max_seq_len tokens
// (before rendering its turns one by one, so a huge line costs one render).
Result<TrainExample> chat_train_example(const nlohmann::json& messages, const Tokenizer& tokenizer,
                                        const ChatTemplate& chat_template, int64_t max_seq_len);

// The refusal of an example of `tokens` tokens over `max_seq_len`, or ok.
Status check_example_length(int64_t tokens, int64_t max_seq_len);

}  // namespace loragate::train
