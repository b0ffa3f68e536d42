// ChatTemplate façade: typical Llama 3 / Llama 2 / Mistral / ChatML templates
// (typed in here; expected strings checked against Python Jinja2 as
// transformers configures it), the plain fallback, errors, limits, labels.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <string>

#include "chat/chat_template.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

using nlohmann::json;

const char* const kLlama3Template =
    R"~~({% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %})~~";
const char* const kLlama2Template =
    R"~~({% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %})~~";
const char* const kMistralTemplate =
    R"~~({{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %})~~";
const char* const kChatmlTemplate =
    R"~~({% for message in messages %}
    {% if loop.first and message['role'] != 'system' %}
        {{- '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}
    {% endif %}
    {{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}
{% endfor %}
{% if add_generation_prompt %}
{{ '<|im_start|>assistant\n' }}
{% endif %}
)~~";

const char* const kSysConversation = R"~~([{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Hi there "}, {"role": "assistant", "content": "Hello! "}, {"role": "user", "content": "Bye"}])~~";
const char* const kNosysConversation = R"~~([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}, {"role": "user", "content": "Bye"}])~~";

struct FamilyCase {
  const char* family;
  const char* tmpl;
  SpecialTokens tokens;
  const char* conversation;
  bool add_generation_prompt;
  const char* want;
};

const SpecialTokens kLlama3Tokens{"<|begin_of_text|>", "<|eot_id|>", std::nullopt, std::nullopt};
const SpecialTokens kSpTokens{"<s>", "</s>", "<unk>", std::nullopt};

const FamilyCase kFamilyCases[] = {
    {"llama3", kLlama3Template, kLlama3Tokens, kSysConversation, true,
     R"~~(<|begin_of_text|><|start_header_id|>system<|end_header_id|>

Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>

Hi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>

Hello!<|eot_id|><|start_header_id|>user<|end_header_id|>

Bye<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)~~"},
    {"llama3", kLlama3Template, kLlama3Tokens, kSysConversation, false,
     R"~~(<|begin_of_text|><|start_header_id|>system<|end_header_id|>

Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>

Hi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>

Hello!<|eot_id|><|start_header_id|>user<|end_header_id|>

Bye<|eot_id|>)~~"},
    {"llama3", kLlama3Template, kLlama3Tokens, kNosysConversation, true,
     R"~~(<|begin_of_text|><|start_header_id|>user<|end_header_id|>

Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>

Yo<|eot_id|><|start_header_id|>user<|end_header_id|>

Bye<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)~~"},
    {"llama3", kLlama3Template, kLlama3Tokens, kNosysConversation, false,
     R"~~(<|begin_of_text|><|start_header_id|>user<|end_header_id|>

Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>

Yo<|eot_id|><|start_header_id|>user<|end_header_id|>

Bye<|eot_id|>)~~"},
    {"llama2", kLlama2Template, kSpTokens, kSysConversation, true,
     R"~~(<s>[INST] <<SYS>>
Be brief.
<</SYS>>

 Hi there [/INST] Hello! </s><s>[INST] Bye [/INST])~~"},
    {"llama2", kLlama2Template, kSpTokens, kSysConversation, false,
     R"~~(<s>[INST] <<SYS>>
Be brief.
<</SYS>>

 Hi there [/INST] Hello! </s><s>[INST] Bye [/INST])~~"},
    {"llama2", kLlama2Template, kSpTokens, kNosysConversation, true,
     R"~~(<s>[INST] Hi [/INST] Yo </s><s>[INST] Bye [/INST])~~"},
    {"llama2", kLlama2Template, kSpTokens, kNosysConversation, false,
     R"~~(<s>[INST] Hi [/INST] Yo </s><s>[INST] Bye [/INST])~~"},
    {"mistral", kMistralTemplate, kSpTokens, kNosysConversation, true,
     R"~~(<s>[INST] Hi [/INST]Yo</s>[INST] Bye [/INST])~~"},
    {"mistral", kMistralTemplate, kSpTokens, kNosysConversation, false,
     R"~~(<s>[INST] Hi [/INST]Yo</s>[INST] Bye [/INST])~~"},
    {"qwen/chatml", kChatmlTemplate, SpecialTokens{}, kSysConversation, true,
     R"~~(<|im_start|>system
Be brief.<|im_end|>

<|im_start|>user
 Hi there <|im_end|>

<|im_start|>assistant
Hello! <|im_end|>

<|im_start|>user
Bye<|im_end|>

<|im_start|>assistant

)~~"},
    {"qwen/chatml", kChatmlTemplate, SpecialTokens{}, kSysConversation, false,
     R"~~(<|im_start|>system
Be brief.<|im_end|>

<|im_start|>user
 Hi there <|im_end|>

<|im_start|>assistant
Hello! <|im_end|>

<|im_start|>user
Bye<|im_end|>

)~~"},
    {"qwen/chatml", kChatmlTemplate, SpecialTokens{}, kNosysConversation, true,
     R"~~(<|im_start|>system
You are a helpful assistant.<|im_end|>

<|im_start|>user
Hi<|im_end|>

<|im_start|>assistant
Yo<|im_end|>

<|im_start|>user
Bye<|im_end|>

<|im_start|>assistant

)~~"},
    {"qwen/chatml", kChatmlTemplate, SpecialTokens{}, kNosysConversation, false,
     R"~~(<|im_start|>system
You are a helpful assistant.<|im_end|>

<|im_start|>user
Hi<|im_end|>

<|im_start|>assistant
Yo<|im_end|>

<|im_start|>user
Bye<|im_end|>

)~~"},
};

TEST(ChatTemplate, TypicalFamilyTemplatesRenderAsPythonJinja) {
  for (const FamilyCase& c : kFamilyCases) {
    SCOPED_TRACE(std::string(c.family) + " " + c.conversation + (c.add_generation_prompt ? " +gen" : ""));
    Result<ChatTemplate> t = ChatTemplate::from_source(c.tmpl, c.tokens);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    EXPECT_EQ(t->family(), c.family);
    Result<std::string> got = t->render(json::parse(c.conversation), c.add_generation_prompt);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    EXPECT_EQ(*got, c.want);
  }
}

TEST(ChatTemplate, RaiseExceptionIsInvalidArgumentWithTheTemplatesMessage) {
  Result<ChatTemplate> t = ChatTemplate::from_source(kMistralTemplate, kSpTokens);
  ASSERT_TRUE(t.is_ok());
  Result<std::string> got = t->render(json::parse(R"([{"role":"assistant","content":"x"}])"), true);
  ASSERT_FALSE(got.is_ok());
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(got.status().message(), "Conversation roles must alternate user/assistant/user/assistant/...");
  got = t->render(json::parse(R"([{"role":"user","content":"x"},{"role":"tool","content":"y"}])"), true);
  ASSERT_FALSE(got.is_ok());
  EXPECT_EQ(got.status().message(), "Only user and assistant roles are supported!");
}

TEST(ChatTemplate, SyntaxErrorsAreCorruptWithLineAndColumn) {
  struct Bad {
    const char* tmpl;
    const char* where;
  };
  const Bad bad[] = {
      {"{% for m in messages %}\n{{ m.content }}", "line 1, column 1"},  // unclosed for: where it opened
      {"ok\n  {{ 1 + }}", "line 2, column 10"},
      {"{% if x %}{% endfor %}", "line 1, column 14"},
      {"{{ 'abc }}", "line 1, column 4"},
      {"a\nb {% frobnicate %}", "line 2, column 6"},
      {"{{ x ]] }}", "line 1, column 6"},
      {"{% break %}", "line 1, column 4"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.tmpl);
    Result<ChatTemplate> t = ChatTemplate::from_source(b.tmpl, {});
    ASSERT_FALSE(t.is_ok());
    EXPECT_EQ(t.status().code(), StatusCode::kCorrupt);
    EXPECT_NE(t.status().message().find(b.where), std::string::npos) << t.status().message();
  }
  Result<ChatTemplate> cfg =
      ChatTemplate::from_tokenizer_config(R"({"chat_template": "{% if %}"})", "model/tokenizer_config.json");
  ASSERT_FALSE(cfg.is_ok());
  EXPECT_EQ(cfg.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(cfg.status().message().find("model/tokenizer_config.json"), std::string::npos);
}

TEST(ChatTemplate, RuntimeErrorsAreInvalidArgument) {
  const char* const bad[] = {"{{ messages[0].content.nosuchmethod() }}", "{{ 1 + 'a' }}", "{{ nofunc() }}",
                             "{{ 1 / 0 }}", "{% set x = 1 %}{% set x.a = 2 %}"};
  for (const char* tmpl : bad) {
    SCOPED_TRACE(tmpl);
    Result<ChatTemplate> t = ChatTemplate::from_source(tmpl, {});
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    Result<std::string> got = t->render(json::parse(R"([{"role":"user","content":"x"}])"), false);
    ASSERT_FALSE(got.is_ok());
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << got.status().to_string();
  }
}

TEST(ChatTemplate, LimitsGiveResourceExhaustedNotACrash) {
  const char* const heavy[] = {
      "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",  // iterations
      "{% for i in range(900000) %}{{ 'xxxxxxxxxx' }}{% endfor %}",                             // output size
      "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",                                 // recursion
      "{{ 'x' * 100000000 }}",
  };
  for (const char* tmpl : heavy) {
    SCOPED_TRACE(tmpl);
    Result<ChatTemplate> t = ChatTemplate::from_source(tmpl, {});
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    Result<std::string> got = t->render(json::array(), false);
    ASSERT_FALSE(got.is_ok());
    EXPECT_EQ(got.status().code(), StatusCode::kResourceExhausted) << got.status().to_string();
  }
  std::string deep(5000, '(');
  Result<ChatTemplate> t = ChatTemplate::from_source("{{ " + deep + " }}", {});
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().code(), StatusCode::kCorrupt);
}

// Work that no single loop limit catches: quadratic copying, or many steps
// per iteration. Each stops naming the budget it ran out of, within seconds
// (the slowest took 2.1 s on a degraded shared machine, hence 8 s and not 1),
// where the unbudgeted quadratic cases would copy tens of GB.
TEST(ChatTemplate, HostileTemplatesStopFastNamingTheBudget) {
  struct Case {
    const char* tmpl;
    const char* budget;
  };
  const Case hostile[] = {
      {"{% set ns = namespace(a=[]) %}{% for i in range(100000) %}{% set ns.a = ns.a + [i] %}{% endfor %}",
       "MiB of strings and lists"},
      {"{% set ns = namespace(s='') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ 'xxxxxxxxxxxxxxxx' %}"
       "{% endfor %}",
       "MiB of strings and lists"},
      {"{% set ns = namespace(s='x' * 500000) %}{% for i in range(100000) %}{{ ns.s[1:2] }}{% set t = ns.s | upper %}"
       "{% endfor %}",
       "MiB of strings and lists"},
      {"{% set ns = namespace(s='x' * 500000) %}{% for i in range(100000) %}{% if 'y' in ns.s %}{% endif %}"
       "{{ ns.s.count('y') }}{% endfor %}",
       "MiB of strings and lists"},
      {"{% set big = range(200000) | list %}{% for i in range(100000) %}{% if -1 in big %}{% endif %}{% endfor %}",
       "MiB of strings and lists"},
      {"{% for i in range(300000) %}{% if i is even and i is odd or i > 1000000000 or i < -5 %}{% endif %}{% endfor %}",
       "steps"},
  };
  for (const Case& c : hostile) {
    SCOPED_TRACE(c.tmpl);
    Result<ChatTemplate> t = ChatTemplate::from_source(c.tmpl, {});
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    const auto start = std::chrono::steady_clock::now();
    Result<std::string> got = t->render(json::array(), false);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_FALSE(got.is_ok());
    EXPECT_EQ(got.status().code(), StatusCode::kResourceExhausted) << got.status().to_string();
    EXPECT_NE(got.status().message().find(c.budget), std::string::npos) << got.status().to_string();
    EXPECT_LT(seconds, 8.0);
  }
}

TEST(ChatTemplate, PlainFallbackAndConfigParsing) {
  Result<ChatTemplate> t = ChatTemplate::from_tokenizer_config(
      R"({"bos_token": {"content": "<s>", "__type": "AddedToken"}, "eos_token": "</s>", "pad_token": null})", "cfg");
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_TRUE(t->is_plain());
  EXPECT_EQ(t->family(), "plain");
  EXPECT_EQ(*t->special_tokens().bos_token, "<s>");
  EXPECT_FALSE(t->special_tokens().pad_token.has_value());
  json msgs = json::parse(R"([{"role":"system","content":"S"},{"role":"user","content":"U"}])");
  EXPECT_EQ(*t->render(msgs, true), "<s>system: S\nuser: U\nassistant:");
  EXPECT_EQ(*t->render(msgs, false), "<s>system: S\nuser: U\n");

  // A list of named templates: "default" is used.
  t = ChatTemplate::from_tokenizer_config(
      R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ eos_token }}"}],
          "eos_token": "</s>"})",
      "cfg");
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(*t->render(json::array(), false), "D</s>");
  EXPECT_EQ(t->family(), "custom");

  EXPECT_EQ(ChatTemplate::from_tokenizer_config("not json", "cfg").status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(t->render(json::object(), false).status().code(), StatusCode::kInvalidArgument);
}

TEST(ChatTemplate, LoadPrefersChatTemplateJinjaAndFallsBackToPlain) {
  std::string dir = testing::make_temp_dir("lg-chat");
  ASSERT_FALSE(dir.empty());
  Result<ChatTemplate> t = ChatTemplate::load(dir);  // nothing there
  ASSERT_TRUE(t.is_ok());
  EXPECT_TRUE(t->is_plain());
  std::ofstream(dir + "/tokenizer_config.json") << R"({"bos_token": "<s>", "chat_template": "cfg"})";
  std::ofstream(dir + "/chat_template.jinja") << "{{ bos_token }}[INST] {{ messages[0].content }} [/INST]\n";
  t = ChatTemplate::load(dir);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t->family(), "mistral");
  EXPECT_EQ(*t->render(json::parse(R"([{"role":"user","content":"q"}])"), true), "<s>[INST] q [/INST]");
}

TEST(ChatTemplate, ToolsAndKeyOrderWithOrderedJson) {
  const char* tmpl = "{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}"
                     "{% for m in messages %}{% for tc in m.tool_calls %}{{ tc.function.arguments | tojson }}"
                     "{% endfor %}{% endfor %}";
  Result<ChatTemplate> t = ChatTemplate::from_source(tmpl, {});
  ASSERT_TRUE(t.is_ok());
  auto msgs = nlohmann::ordered_json::parse(
      R"([{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":{"z":1,"a":"é"}}}]}])");
  auto extra = nlohmann::ordered_json::parse(R"({"tools":[{"type":"function","function":{"name":"f","b":2,"a":1}}]})");
  Result<std::string> got = t->render(msgs, false, extra);
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(*got, R"({"type": "function", "function": {"name": "f", "b": 2, "a": 1}})"
                  "\n"
                  R"({"z": 1, "a": "é"})");
}

TEST(ChatTemplate, ChatMessageStructRenders) {
  Result<ChatTemplate> t = ChatTemplate::from_source(
      "{% for m in messages %}{{ m.role }}|{{ m.content }}|{{ m.reasoning_content is defined }}|{{ m.name }};{% endfor %}", {});
  ASSERT_TRUE(t.is_ok());
  std::vector<ChatMessage> msgs(2);
  msgs[0].role = "user";
  msgs[0].content = "hi";
  msgs[0].extra = {{"name", "bob"}};
  msgs[1].role = "assistant";
  msgs[1].content = "yo";
  msgs[1].reasoning_content = "think";
  EXPECT_EQ(*t->render(msgs, false), "user|hi|False|bob;assistant|yo|True|;");
}

TEST(ChatTemplate, FamilyLabels) {
  EXPECT_EQ(chat_template_family("{{ '<|im_start|>' }}"), "qwen/chatml");
  EXPECT_EQ(chat_template_family("<|start_header_id|>"), "llama3");
  EXPECT_EQ(chat_template_family("[INST] <<SYS>>"), "llama2");
  EXPECT_EQ(chat_template_family("[INST]"), "mistral");
  EXPECT_EQ(chat_template_family("{{ messages }}"), "custom");
  EXPECT_EQ(ChatTemplate::plain().family(), "plain");
}

}  // namespace
}  // namespace loragate
