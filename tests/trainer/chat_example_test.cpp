// load_train_data on {"messages"} files: rendered with the chat template,
// encoded without adding special tokens, the loss on exactly the assistant
// turns' content and end-of-turn token; templates whose turns do not render
// as token prefixes are refused, naming the line.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"
#include "tests/trainer/train_data_fixtures.h"
#include "trainer/train_data.h"

namespace loragate::train {
namespace {

using nlohmann::json;
using testing::TrainFiles;

const char* const kChatMl =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

SpecialTokens special_tokens(std::optional<std::string> bos, std::optional<std::string> eos = std::nullopt) {
  SpecialTokens tokens;
  tokens.bos_token = std::move(bos);
  tokens.eos_token = std::move(eos);
  return tokens;
}

json msg(const std::string& role, const std::string& content) { return {{"role", role}, {"content", content}}; }

// [start, end) of each run of target tokens.
std::vector<std::pair<size_t, size_t>> target_runs(const TrainExample& ex) {
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t t = 0; t < ex.target.size(); ++t) {
    if (!ex.target[t]) continue;
    if (runs.empty() || runs.back().second != t) runs.emplace_back(t, t);
    runs.back().second = t + 1;
  }
  return runs;
}

std::vector<int32_t> slice(const std::vector<int32_t>& ids, std::pair<size_t, size_t> run) {
  return {ids.begin() + static_cast<std::ptrdiff_t>(run.first), ids.begin() + static_cast<std::ptrdiff_t>(run.second)};
}

class ChatExampleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = testing::make_char_tokenizer();
    ASSERT_NE(tokenizer_, nullptr);
  }

  Result<TrainData> load_messages(const ChatTemplate& chat, const std::vector<json>& conversations,
                                  int64_t max_seq_len = 4096) {
    std::vector<json> lines;
    for (const json& messages : conversations) lines.push_back({{"messages", messages}});
    path_ = files_.write_lines("chat.jsonl", lines);
    return load_train_data(path_, *tokenizer_, chat, max_seq_len);
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  TrainFiles files_;
  std::string path_;
};

TEST_F(ChatExampleTest, ChatMlLearnsEachAssistantContentAndItsImEndNotTheNewline) {
  Result<ChatTemplate> chat = ChatTemplate::from_source(kChatMl, {});
  ASSERT_TRUE(chat.is_ok()) << chat.status().to_string();
  const json messages = {msg("system", "Be brief."), msg("user", "Hi"), msg("assistant", "Hello there"),
                         msg("user", "Tell a tale"), msg("assistant", "Once upon a time."), msg("user", "Thanks")};
  Result<TrainData> data = load_messages(*chat, {messages});
  ASSERT_TRUE(data.is_ok()) << data.status().to_string();
  const TrainExample& ex = data->examples.at(0);

  std::string text;
  for (const json& m : messages) {
    text += "<|im_start|>" + m["role"].get<std::string>() + "\n" + m["content"].get<std::string>() + "<|im_end|>\n";
  }
  EXPECT_EQ(ex.ids, tokenizer_->encode(text, /*add_special_tokens=*/false));
  EXPECT_EQ(ex.ids.front(), testing::kCharImStart);  // no BOS: the template writes none

  const auto runs = target_runs(ex);
  ASSERT_EQ(runs.size(), 2u);
  int64_t expected_targets = 0;
  for (size_t k = 0; k < runs.size(); ++k) {
    std::vector<int32_t> expected = tokenizer_->encode(messages[2 + 2 * k]["content"].get<std::string>(), false);
    expected.push_back(testing::kCharImEnd);
    EXPECT_EQ(slice(ex.ids, runs[k]), expected) << "turn " << k;
    EXPECT_EQ(tokenizer_->decode(std::vector<int32_t>{ex.ids[runs[k].second]}, false), "\n");
    expected_targets += static_cast<int64_t>(expected.size());
  }
  EXPECT_EQ(ex.num_targets(), expected_targets);
  EXPECT_EQ(data->target_tokens, expected_targets);
}

TEST_F(ChatExampleTest, BosWrittenByTheTemplateIsNotAddedTwice) {
  Result<ChatTemplate> chat =
      ChatTemplate::from_source(std::string("{{ bos_token }}") + kChatMl, special_tokens("<s>"));
  ASSERT_TRUE(chat.is_ok());
  Result<TrainData> data = load_messages(*chat, {json{msg("user", "Hi"), msg("assistant", "Yo")}});
  ASSERT_TRUE(data.is_ok()) << data.status().to_string();
  const TrainExample& ex = data->examples.at(0);
  ASSERT_GE(ex.ids.size(), 2u);
  EXPECT_EQ(ex.ids[0], testing::kCharBos);
  EXPECT_EQ(ex.ids[1], testing::kCharImStart);
  EXPECT_EQ(std::count(ex.ids.begin(), ex.ids.end(), testing::kCharBos), 1);
}

TEST_F(ChatExampleTest, PlainFallbackLearnsTheWholeTurnForLackOfAnEndToken) {
  const ChatTemplate chat = ChatTemplate::plain(special_tokens("<s>"));
  Result<TrainData> data = load_messages(chat, {json{msg("user", "Hi"), msg("assistant", "Hello")}});
  ASSERT_TRUE(data.is_ok()) << data.status().to_string();
  const TrainExample& ex = data->examples.at(0);
  EXPECT_EQ(ex.ids, tokenizer_->encode("<s>user: Hi\nassistant: Hello\n", false));
  const auto runs = target_runs(ex);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(slice(ex.ids, runs[0]), tokenizer_->encode(" Hello\n", false));
  EXPECT_EQ(runs[0].second, ex.ids.size());
}

TEST_F(ChatExampleTest, TemplatesThatRenderATurnDifferentlyLaterAreRefused) {
  // An assistant message rendered last gets a ".": fine when it is last (line
  // 1), but then its tokens are not a prefix of a longer conversation's (line 2).
  Result<ChatTemplate> chat = ChatTemplate::from_source(
      "{% for m in messages %}{{ m['content'] }}{% if loop.last and m['role'] == 'assistant' %}.{% endif %}"
      "{{ '\\n' }}{% endfor %}",
      {});
  ASSERT_TRUE(chat.is_ok());
  Result<TrainData> data = load_messages(
      *chat, {json{msg("user", "a"), msg("assistant", "b")},
              json{msg("user", "a"), msg("assistant", "b"), msg("user", "c")}});
  ASSERT_FALSE(data.is_ok());
  EXPECT_EQ(data.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(data.status().message().find(
                path_ + ":2: messages[1]: the chat template's tokens up to this assistant turn are not a prefix"),
            std::string::npos)
      << data.status().message();
}

TEST_F(ChatExampleTest, MalformedConversationsAreRefusedNamingLineAndMessage) {
  Result<ChatTemplate> chat = ChatTemplate::from_source(kChatMl, {});
  ASSERT_TRUE(chat.is_ok());
  const json ok = {msg("user", "a"), msg("assistant", "b")};
  struct Case {
    json messages;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"SECRET", "messages: must be a non-empty list"},
      {json::array(), "messages: must be a non-empty list"},
      {json{msg("user", "SECRET"), "SECRET"}, "messages[1]: must be an object"},
      {json{msg("wizard", "SECRET")}, "messages[0].role: must be one of"},
      {json{{{"content", "SECRET"}}}, "messages[0].role: must be one of"},
      {json{msg("user", "SECRET"), {{"role", "assistant"}, {"content", 5}}}, "messages[1].content: must be a string"},
      {json{{{"role", "user"}}}, "messages[0].content: must be a string"},
      {json{msg("system", "SECRET"), msg("user", "SECRET")}, "no token to learn"},
  };
  for (const Case& c : cases) {
    Result<TrainData> data = load_messages(*chat, {ok, c.messages});
    ASSERT_FALSE(data.is_ok()) << c.messages.dump();
    EXPECT_EQ(data.status().code(), StatusCode::kInvalidArgument);
    const std::string& m = data.status().message();
    EXPECT_EQ(m.rfind(path_ + ":2: ", 0), 0u) << m;
    EXPECT_NE(m.find(c.expect), std::string::npos) << m;
    EXPECT_EQ(m.find("SECRET"), std::string::npos) << m;
  }
}

TEST_F(ChatExampleTest, TemplateErrorsAndLengthNameTheLine) {
  Result<ChatTemplate> raising = ChatTemplate::from_source(
      "{% for m in messages %}{% if m['role'] == 'tool' %}{{ raise_exception('no tools here') }}{% endif %}"
      "{{ m['content'] }}\n{% endfor %}",
      {});
  ASSERT_TRUE(raising.is_ok());
  Result<TrainData> data = load_messages(*raising, {json{msg("tool", "x"), msg("assistant", "y")}});
  ASSERT_FALSE(data.is_ok());
  EXPECT_EQ(data.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(data.status().message().find(path_ + ":1: chat template: "), std::string::npos) << data.status().message();
  EXPECT_NE(data.status().message().find("no tools here"), std::string::npos);

  Result<ChatTemplate> chat = ChatTemplate::from_source(kChatMl, {});
  ASSERT_TRUE(chat.is_ok());
  const json messages = {msg("user", "Hi"), msg("assistant", "Hello")};
  const int64_t length = static_cast<int64_t>(
      tokenizer_->encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n", false).size());
  EXPECT_TRUE(load_messages(*chat, {messages}, length).is_ok());
  data = load_messages(*chat, {messages}, length - 1);
  ASSERT_FALSE(data.is_ok());
  EXPECT_NE(data.status().message().find(path_ + ":1: the example is " + std::to_string(length) + " tokens"),
            std::string::npos)
      << data.status().message();
}

// stories260K has no chat template; a Llama-2-like one over its own <s> and
// </s> shows the same on a SentencePiece tokenizer.
TEST(ChatExampleStories, AssistantContentAndEosAreTheTargets) {
  LG_REQUIRE_SHARED("models/stories260K/tokenizer.json");
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::load(testing::shared_dir() + "/models/stories260K");
  ASSERT_TRUE(tokenizer.is_ok()) << tokenizer.status().to_string();
  const Tokenizer& tk = **tokenizer;
  Result<ChatTemplate> chat = ChatTemplate::from_source(
      "{{ bos_token }}{% for m in messages %}{{ m['role'] + ':\\n' + m['content'] }}"
      "{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}{{ '\\n' }}{% endfor %}"
      "{% if add_generation_prompt %}{{ 'assistant:\\n' }}{% endif %}",
      special_tokens("<s>", "</s>"));
  ASSERT_TRUE(chat.is_ok());
  const std::vector<std::string> replies = {"Lily was happy.", "The cat sat on the mat."};
  const json messages = {msg("user", "Once upon a time"), msg("assistant", replies[0]), msg("user", "Then?"),
                         msg("assistant", replies[1])};
  TrainFiles files;
  const std::string path = files.write_lines("chat.jsonl", {{{"messages", messages}}});
  Result<TrainData> data = load_train_data(path, tk, *chat, 512);
  ASSERT_TRUE(data.is_ok()) << data.status().to_string();
  const TrainExample& ex = data->examples.at(0);

  const std::string text = "<s>user:\nOnce upon a time\nassistant:\n" + replies[0] +
                           "</s>\nuser:\nThen?\nassistant:\n" + replies[1] + "</s>\n";
  EXPECT_EQ(ex.ids, tk.encode(text, false));
  EXPECT_EQ(ex.ids.front(), *tk.bos_id());
  const auto runs = target_runs(ex);
  ASSERT_EQ(runs.size(), 2u);
  for (size_t k = 0; k < runs.size(); ++k) {
    // The run starts where the text before the reply ends, as tokens.
    const size_t reply_at = text.find(replies[k]);
    EXPECT_EQ(runs[k].first, tk.encode(text.substr(0, reply_at), false).size()) << k;
    EXPECT_EQ(ex.ids[runs[k].second - 1], *tk.eos_id()) << k;
    std::vector<int32_t> reply = slice(ex.ids, runs[k]);
    reply.pop_back();
    EXPECT_EQ(tk.decode(reply, false), replies[k]) << k;
  }
}

}  // namespace
}  // namespace loragate::train
