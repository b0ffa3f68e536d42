// A {"messages": [...]} line rendered and masked (chat_example.h).
#include "trainer/chat_example.h"

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace loragate::train {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 5> kChatRoles = {"system", "developer", "user", "assistant", "tool"};

Status check_chat_messages(const json& messages) {
  if (!messages.is_array() || messages.empty()) {
    return Status::invalid_argument("messages: must be a non-empty list of {\"role\", \"content\"} objects");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string field = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return Status::invalid_argument(field + ": must be an object {\"role\", \"content\"}");
    auto role = m.find("role");
    const bool known = role != m.end() && role->is_string() &&
                       std::find(kChatRoles.begin(), kChatRoles.end(), role->get_ref<const std::string&>()) !=
                           kChatRoles.end();
    if (!known) {
      return Status::invalid_argument(field + ".role: must be one of system, developer, user, assistant, tool");
    }
    auto content = m.find("content");
    if (content == m.end() || !content->is_string()) {
      return Status::invalid_argument(field + ".content: must be a string");
    }
  }
  return Status::ok();
}

// messages[0, count) as a list of their own.
json first_messages(const json& messages, size_t count) {
  json out = json::array();
  for (size_t i = 0; i < count; ++i) out.push_back(messages[i]);
  return out;
}

Result<std::vector<int32_t>> render_ids(const json& messages, bool add_generation_prompt, const Tokenizer& tokenizer,
                                        const ChatTemplate& chat_template) {
  Result<std::string> text = chat_template.render(messages, add_generation_prompt);
  if (!text.is_ok()) return text.status().with_context("chat template");
  return tokenizer.encode(text.value(), /*add_special_tokens=*/false);
}

bool is_token_prefix(const std::vector<int32_t>& prefix, const std::vector<int32_t>& ids) {
  return prefix.size() <= ids.size() && std::equal(prefix.begin(), prefix.end(), ids.begin());
}

}  // namespace

Status check_example_length(int64_t tokens, int64_t max_seq_len) {
  if (tokens <= max_seq_len) return Status::ok();
  return Status::invalid_argument("the example is " + std::to_string(tokens) + " tokens, over max_seq_len " +
                                  std::to_string(max_seq_len) + " (examples are refused, never cut)");
}

Result<TrainExample> chat_train_example(const json& messages, const Tokenizer& tokenizer,
                                        const ChatTemplate& chat_template, int64_t max_seq_len) {
  LG_RETURN_IF_ERROR(check_chat_messages(messages));
  TrainExample example;
  LG_ASSIGN_OR_RETURN(example.ids, render_ids(messages, /*add_generation_prompt=*/false, tokenizer, chat_template));
  LG_RETURN_IF_ERROR(check_example_length(static_cast<int64_t>(example.ids.size()), max_seq_len));
  example.target.assign(example.ids.size(), 0);

  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i]["role"] != "assistant") continue;
    const std::string field = "messages[" + std::to_string(i) + "]";
    LG_ASSIGN_OR_RETURN(std::vector<int32_t> before,
                        render_ids(first_messages(messages, i), /*add_generation_prompt=*/true, tokenizer,
                                   chat_template));
    LG_ASSIGN_OR_RETURN(std::vector<int32_t> through,
                        render_ids(first_messages(messages, i + 1), /*add_generation_prompt=*/false, tokenizer,
                                   chat_template));
    if (!is_token_prefix(before, through) || !is_token_prefix(through, example.ids)) {
      return Status::invalid_argument(
          field + ": the chat template's tokens up to this assistant turn are not a prefix of the whole "
                  "conversation's (the template renders a turn differently when more follows), so the turn's "
                  "tokens cannot be marked for the loss");
    }
    // Drop what follows the turn's end-of-turn token (its last special one).
    size_t end = through.size();
    for (size_t t = through.size(); t > before.size(); --t) {
      if (tokenizer.is_special(through[t - 1])) {
        end = t;
        break;
      }
    }
    std::fill(example.target.begin() + static_cast<std::ptrdiff_t>(before.size()),
              example.target.begin() + static_cast<std::ptrdiff_t>(end), uint8_t{1});
  }
  if (!example.target.empty()) example.target[0] = 0;  // nothing predicts the first token
  return example;
}

}  // namespace loragate::train
