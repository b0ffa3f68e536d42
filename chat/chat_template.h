// Chat templates: renders OpenAI-style message lists into a model's prompt
// with the Hugging Face `chat_template` (a Jinja template) of its tokenizer
// config, byte for byte as transformers / @huggingface/jinja would.
//
// The rendered text contains every special token the template writes
// (BOS included), so encode it without adding special tokens again.
// A tokenizer without a chat template gets a plain fallback:
//   {bos}role: content\n ... [assistant:]
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace loragate {

namespace jinja {
struct Program;
}

// The special tokens that tokenizer_config.json sets; unset ones are not passed.
struct SpecialTokens {
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> unk_token;
  std::optional<std::string> pad_token;
};

struct ChatMessage {
  std::string role;
  std::string content;
  std::optional<std::string> reasoning_content;
  nlohmann::json extra = nlohmann::json::object();  // tool_calls, name, tool_call_id... merged into the message

  nlohmann::json to_json() const;
};

class ChatTemplate {
 public:
  // From tokenizer_config.json text; a config without chat_template gives the plain fallback.
  // `source` names the file in error messages.
  static Result<ChatTemplate> from_tokenizer_config(const std::string& json_text, const std::string& source);
  // Reads <model_dir>/chat_template.jinja if present, else tokenizer_config.json; plain when neither has one.
  static Result<ChatTemplate> load(const std::string& model_dir);
  // Parses a template; syntax errors are Status::corrupt with line and column.
  static Result<ChatTemplate> from_source(std::string template_text, SpecialTokens tokens);
  // The plain fallback.
  static ChatTemplate plain(SpecialTokens tokens = {});

  // `messages` is the OpenAI JSON array (kept as given, so templates see every
  // field); `extra_vars` (an object) become template variables, e.g.
  // {"enable_thinking": false} or {"tools": [...]}. raise_exception() and other
  // runtime errors give Status::invalid_argument with the template's message;
  // limits (1 MiB output, loop iterations, call depth) give resource_exhausted.
  Result<std::string> render(const nlohmann::json& messages, bool add_generation_prompt,
                             const nlohmann::json& extra_vars = nlohmann::json::object()) const;
  // Same, keeping the key order of objects (tojson of tool schemas then matches Python).
  Result<std::string> render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                             const nlohmann::ordered_json& extra_vars = nlohmann::ordered_json::object()) const;
  Result<std::string> render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                             const nlohmann::json& extra_vars = nlohmann::json::object()) const;

  // "qwen/chatml", "llama3", "llama2", "mistral", "custom" or "plain": a best-effort label from the text.
  std::string family() const { return family_; }
  const std::string& source() const { return source_; }
  const SpecialTokens& special_tokens() const { return tokens_; }
  bool is_plain() const { return plain_; }

 private:
  ChatTemplate() = default;
  template <typename J>
  Result<std::string> render_impl(const J& messages, bool add_generation_prompt, const J& extra_vars) const;

  std::shared_ptr<const jinja::Program> program_;
  std::string source_;
  SpecialTokens tokens_;
  std::string family_;
  bool plain_ = false;
};

// The family label for a template text (what ChatTemplate::family() returns).
std::string chat_template_family(const std::string& template_text);

}  // namespace loragate
