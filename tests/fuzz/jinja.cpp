// Chat templates: the Jinja lexer, parser and interpreter (filters, tests,
// methods, macros, loops, namespaces) through ChatTemplate, rendering with
// and without the generation prompt. Runaway templates must stop at the
// interpreter's limits (output size, loop iterations, call depth); one that
// runs past libFuzzer's -timeout is a finding.
//
// Input: "<template>[\0<messages JSON array>[\0<extra variables JSON object>]]".
// Without messages a fixed conversation (system, user, assistant with
// reasoning and a tool call, tool answer) is used. A template part that is a
// JSON object is read as tokenizer_config.json instead.
#include <cstddef>
#include <cstdint>
#include <string>

#include "chat/chat_template.h"
#include "fuzz_util.h"

using namespace loragate;
using nlohmann::json;

namespace {

const json& default_messages() {
  static const json m = json::parse(R"([
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "", "reasoning_content": "Use the tool.",
     "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "call_0"},
    {"role": "user", "content": "Thanks! \u00e9\u65e5"}
  ])");
  return m;
}

const json& default_vars() {
  static const json v = json::parse(R"({"enable_thinking": false, "tools": [{"type": "function", "function":
    {"name": "get_weather", "description": "Weather", "parameters": {"type": "object",
     "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]})");
  return v;
}

json parse_or_null(std::string_view text) { return json::parse(text.begin(), text.end(), nullptr, false); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto [source, rest] = fuzz::split_at_nul(input);
  const auto [messages_text, vars_text] = fuzz::split_at_nul(rest);

  json messages = default_messages();
  json vars = default_vars();
  if (!messages_text.empty()) {
    json m = parse_or_null(messages_text);
    if (m.is_array()) messages = std::move(m);
  }
  if (!vars_text.empty()) {
    json v = parse_or_null(vars_text);
    if (v.is_object()) vars = std::move(v);
  }

  Result<ChatTemplate> parsed = (!source.empty() && source.front() == '{')
                                    ? ChatTemplate::from_tokenizer_config(std::string(source), "fuzz/tokenizer_config.json")
                                    : ChatTemplate::from_source(std::string(source), {"<s>", "</s>", "<unk>", std::nullopt});
  if (!parsed.is_ok()) return 0;
  const ChatTemplate& tmpl = parsed.value();
  (void)tmpl.family();
  for (bool generation_prompt : {false, true}) (void)tmpl.render(messages, generation_prompt, vars);
  return 0;
}
