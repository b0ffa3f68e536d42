// Renders every Qwen3 chat of ../shared/tokenizers/golden_chat.json with the
// template from qwen3/tokenizer_config.json and compares byte for byte with
// the text @huggingface/jinja produced.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "chat/chat_template.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

using nlohmann::ordered_json;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "" when equal, else where and how the texts differ.
std::string first_difference(const std::string& want, const std::string& got) {
  std::size_t n = std::min(want.size(), got.size());
  std::size_t k = 0;
  while (k < n && want[k] == got[k]) ++k;
  if (k == n && want.size() == got.size()) return "";
  std::ostringstream os;
  os << "first differing byte at offset " << k << " (want " << want.size() << " bytes, got " << got.size()
     << ")\n  want: " << ordered_json(want.substr(k, 60)).dump() << "\n  got:  " << ordered_json(got.substr(k, 60)).dump();
  return os.str();
}

TEST(GoldenChat, Qwen3RendersMatchByteForByte) {
  LG_REQUIRE_SHARED("tokenizers/golden_chat.json");
  const std::string dir = testing::shared_dir() + "/tokenizers";
  ordered_json golden = ordered_json::parse(read_text(dir + "/golden_chat.json"));
  Result<ChatTemplate> tmpl = ChatTemplate::load(dir + "/qwen3");
  ASSERT_TRUE(tmpl.is_ok()) << tmpl.status().to_string();
  EXPECT_EQ(tmpl->family(), "qwen/chatml");
  ASSERT_TRUE(tmpl->special_tokens().eos_token.has_value());
  EXPECT_EQ(*tmpl->special_tokens().eos_token, golden["templates"]["qwen3"]["context"]["eos_token"].get<std::string>());
  EXPECT_FALSE(tmpl->special_tokens().bos_token.has_value());

  const ordered_json& renders = golden["templates"]["qwen3"]["renders"];
  ASSERT_EQ(renders.size(), 10u);
  for (const auto& r : renders) {
    const ordered_json& messages = golden["conversations"][r["conversation"].get<std::string>()];
    ordered_json extra = r.contains("extra_context") ? r["extra_context"] : ordered_json::object();  // enable_thinking...
    SCOPED_TRACE(r["conversation"].get<std::string>() + " add_generation_prompt=" + r["add_generation_prompt"].dump() +
                 " extra=" + extra.dump());
    Result<std::string> got = tmpl->render(messages, r["add_generation_prompt"].get<bool>(), extra);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    std::string diff = first_difference(r["text"].get<std::string>(), *got);
    EXPECT_TRUE(diff.empty()) << diff;
  }
}

TEST(GoldenChat, Mistral7bHasNoTemplateAndGetsThePlainFallback) {
  LG_REQUIRE_SHARED("tokenizers/mistral7b/tokenizer_config.json");
  Result<ChatTemplate> tmpl = ChatTemplate::load(testing::shared_dir() + "/tokenizers/mistral7b");
  ASSERT_TRUE(tmpl.is_ok()) << tmpl.status().to_string();
  EXPECT_TRUE(tmpl->is_plain());
  EXPECT_EQ(tmpl->family(), "plain");
  Result<std::string> got =
      tmpl->render(nlohmann::json::parse(R"([{"role":"user","content":"Hi"}])"), true);
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(*got, "<s>user: Hi\nassistant:");
}

}  // namespace
// The work budgets leave room for real conversations: a thousand turns of
// a real template, thinking blocks included, render well inside them.
TEST(GoldenChat, ALongConversationRendersWithinTheWorkBudgets) {
  LG_REQUIRE_SHARED("tokenizers/qwen3/tokenizer_config.json");
  Result<ChatTemplate> tmpl = ChatTemplate::load(testing::shared_dir() + "/tokenizers/qwen3");
  ASSERT_TRUE(tmpl.is_ok()) << tmpl.status().to_string();
  nlohmann::json messages = nlohmann::json::array({{{"role", "system"}, {"content", std::string(2000, 's')}}});
  for (int turn = 0; turn < 1000; ++turn) {
    messages.push_back({{"role", "user"}, {"content", "question " + std::to_string(turn) + std::string(200, 'q')}});
    messages.push_back({{"role", "assistant"}, {"content", "<think>hm</think>answer " + std::string(200, 'a')}});
  }
  Result<std::string> text = tmpl->render(messages, true);
  ASSERT_TRUE(text.is_ok()) << text.status().to_string();
  EXPECT_GT(text->size(), 400000u);
}

}  // namespace loragate
