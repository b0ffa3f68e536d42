// OpenAI request bodies, as /v1/completions and /v1/chat/completions read them
// before anything reaches the engine: the JSON object, the shared fields
// (sampling parameters, stream, model, scenario, cache_salt, refused options)
// for both routes and their validation, the chat messages (rendered through a ChatML
// template and the plain fallback, then encoded), and the completion prompt
// (text encoded with the stories260K tokenizer from ../shared when present;
// token ids decoded as echo does).
//
// Input: a request body.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "fuzz_util.h"
#include "gateway/openai/openai_chat.h"
#include "gateway/openai/openai_completions.h"
#include "gateway/openai/request_fields.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace loragate;

const char* kChatMl =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const Tokenizer* tokenizer = nullptr;
const ChatTemplate* chatml = nullptr;
const ChatTemplate* plain = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string dir = fuzz::shared_dir() + "/models/stories260K";
  if (fuzz::file_exists(dir + "/tokenizer.json")) {
    auto loaded = Tokenizer::load(dir);
    if (loaded.is_ok()) tokenizer = std::move(loaded).value().release();
  }
  if (tokenizer == nullptr) std::fprintf(stderr, "fuzz_openai_request: no stories260K tokenizer; prompts are not encoded\n");
  chatml = new ChatTemplate(std::move(ChatTemplate::from_source(kChatMl, {}).value()));
  plain = new ChatTemplate(ChatTemplate::plain({"<s>", "</s>", std::nullopt, std::nullopt}));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body_text(reinterpret_cast<const char*>(data), size);
  nlohmann::json body;
  if (parse_json_object(body_text, &body)) return 0;
  for (bool chat : {false, true}) {
    CommonFields fields;
    if (auto err = read_common_fields(body, chat, &fields)) {
      (void)err->to_response();
    } else {
      (void)fields.params.validate();
      if (fields.n < 1 || fields.n > kMaxChoices) __builtin_trap();  // n sequences are submitted per prompt
      // The prefix cache's salt reaches the engine only within its bounds.
      if (fields.cache_salt.size() > kMaxCacheSaltBytes) __builtin_trap();
      const auto salt = body.find("cache_salt");
      if (fields.cache_salt.empty() != (salt == body.end() || salt->is_null())) __builtin_trap();
    }
  }
  nlohmann::json messages;
  if (!read_chat_messages(body, &messages)) {
    for (const ChatTemplate* t : {chatml, plain}) {
      auto rendered = t->render(messages, /*add_generation_prompt=*/true);
      if (rendered.is_ok() && tokenizer != nullptr) (void)tokenizer->encode(rendered.value(), false);
    }
  }
  std::vector<CompletionPrompt> prompts;
  if (!read_completion_prompts(body, &prompts)) {
    if (prompts.empty() || prompts.size() > kMaxPrompts) __builtin_trap();
    if (tokenizer != nullptr) {
      for (const CompletionPrompt& prompt : prompts) {
        if (prompt.text) {
          (void)tokenizer->encode(*prompt.text, /*add_special_tokens=*/true);
        } else {
          (void)tokenizer->decode(prompt.ids, /*skip_special_tokens=*/true);  // what echo shows
        }
      }
    }
  }
  return 0;
}
