// load_train_data on {"prompt", "completion"} files: the loss mask, the file's
// checks and errors (line numbers, never content), and the real fixtures of
// ../shared/eval/scenarios loaded with the target counts they were built with.
#include "trainer/train_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/sha256.h"
#include "tests/test_util.h"
#include "tests/trainer/train_data_fixtures.h"

namespace loragate::train {
namespace {

using nlohmann::json;
using testing::TrainFiles;

class TrainDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = testing::make_char_tokenizer();
    ASSERT_NE(tokenizer_, nullptr);
  }

  Result<TrainData> load(const std::string& path, int64_t max_seq_len = 1024,
                         const std::vector<std::string>& roots = {}) {
    return load_train_data(path, *tokenizer_, chat_, max_seq_len, roots);
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  ChatTemplate chat_ = ChatTemplate::plain({});
  TrainFiles files_;
};

TEST_F(TrainDataTest, PromptCompletionLearnsTheCompletionTokensOnly) {
  const std::vector<json> lines = {
      {{"prompt", "Once upon a"}, {"completion", " time, Mia."}, {"completion_tokens", 3}, {"id", "x"}},
      {{"prompt", "The cat"}, {"completion", " sat."}},
  };
  const std::string path = files_.write_lines("train.jsonl", lines);
  Result<TrainData> data = load(path);
  ASSERT_TRUE(data.is_ok()) << data.status().to_string();
  ASSERT_EQ(data->examples.size(), 2u);
  int64_t total = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string prompt = lines[i]["prompt"], completion = lines[i]["completion"];
    const TrainExample& ex = data->examples[i];
    EXPECT_EQ(ex.ids, tokenizer_->encode(prompt + completion, true));
    EXPECT_EQ(ex.ids.front(), testing::kCharBos);
    ASSERT_EQ(ex.target.size(), ex.ids.size());
    const size_t prompt_len = tokenizer_->encode(prompt, true).size();
    for (size_t t = 0; t < ex.ids.size(); ++t) EXPECT_EQ(ex.target[t], t >= prompt_len ? 1 : 0) << i << ":" << t;
    total += ex.num_targets();
  }
  // " time, Mia." is 11 characters, "ti" one token: 10 targets; " sat." 5.
  EXPECT_EQ(data->examples[0].num_targets(), 10);
  EXPECT_EQ(data->examples[1].num_targets(), 5);
  EXPECT_EQ(data->target_tokens, total);
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  EXPECT_EQ(data->sha256, sha256_hex(bytes.str()));
}

TEST_F(TrainDataTest, BlankLinesCrlfAndBomAreSkippedAndLinesCountFromOne) {
  const std::string line = R"({"prompt": "a", "completion": " b"})";
  Result<TrainData> data = load(files_.write("ok.jsonl", "\xEF\xBB\xBF" + line + "\r\n\n  \t\n" + line + "\n\n"));
  ASSERT_TRUE(data.is_ok()) << data.status().to_string();
  EXPECT_EQ(data->examples.size(), 2u);
  EXPECT_EQ(data->examples[0].ids, data->examples[1].ids);

  const std::string path = files_.write("bad.jsonl", line + "\n\n\r\n{\"prompt\": ");
  Result<TrainData> bad = load(path);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find(path + ":4: invalid JSON"), std::string::npos) << bad.status().message();
}

TEST_F(TrainDataTest, MalformedLinesAreRefusedNamingTheLineNeverTheContent) {
  const std::string good = R"({"prompt": "a", "completion": " b"})";
  struct Case {
    std::string second_line;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {R"({"prompt": "SECRET, "completion": "x"})", "invalid JSON at column"},
      {R"({"prompt": 1e999, "completion": "SECRET"})", "invalid JSON"},
      {R"(["SECRET"])", "must be a JSON object, got a list"},
      {R"("SECRET")", "must be a JSON object, got a string"},
      {R"({"text": "SECRET"})", "must be {\"prompt\", \"completion\"} or {\"messages\": [...]}"},
      {R"({"prompt": "SECRET"})", "completion: missing"},
      {R"({"completion": "SECRET"})", "prompt: missing"},
      {R"({"prompt": "SECRET", "completion": ["SECRET"]})", "completion: must be a string, got a list"},
      {R"({"prompt": 7, "completion": "SECRET"})", "prompt: must be a string, got an integer"},
      {R"({"prompt": "SECRET", "completion": "SECRET", "messages": []})", "has both messages and prompt"},
      {R"({"messages": [{"role": "user", "content": "SECRET"}, {"role": "assistant", "content": "SECRET"}]})",
       "a {\"messages\"} line, but line 1 is {\"prompt\", \"completion\"}: one shape per file"},
      {R"({"prompt": "SECRET", "completion": ""})", "no token to learn"},
      // "t" + "ime": encode(prompt + completion) merges "ti", so it does not start with encode(prompt).
      {R"({"prompt": "SECRET t", "completion": "ime"})", "do not start with the tokens of prompt"},
  };
  for (const Case& c : cases) {
    const std::string path = files_.write("case.jsonl", good + "\n" + c.second_line + "\n" + good + "\n");
    Result<TrainData> data = load(path);
    ASSERT_FALSE(data.is_ok()) << c.second_line;
    EXPECT_EQ(data.status().code(), StatusCode::kInvalidArgument) << c.second_line;
    const std::string& m = data.status().message();
    EXPECT_EQ(m.rfind(path + ":2: ", 0), 0u) << m;
    EXPECT_NE(m.find(c.expect), std::string::npos) << m;
    EXPECT_EQ(m.find("SECRET"), std::string::npos) << m;
  }
}

TEST_F(TrainDataTest, MixedShapesNameBothLines) {
  const std::string path = files_.write(
      "mixed.jsonl",
      "\n" R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})"
      "\n" R"({"prompt": "a", "completion": " b"})" "\n");
  Result<TrainData> data = load(path);
  ASSERT_FALSE(data.is_ok());
  EXPECT_NE(
      data.status().message().find(path + ":3: a {\"prompt\", \"completion\"} line, but line 2 is {\"messages\"}"),
      std::string::npos)
      << data.status().message();
}

TEST_F(TrainDataTest, EmptyAndBlankFilesAreRefused) {
  for (const std::string bytes : {"", "\n", " \n\t\r\n\n"}) {
    const std::string path = files_.write("empty.jsonl", bytes);
    Result<TrainData> data = load(path);
    ASSERT_FALSE(data.is_ok());
    EXPECT_EQ(data.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(data.status().message().find(path + ": no examples"), std::string::npos) << data.status().message();
  }
}

TEST_F(TrainDataTest, MaxSeqLenIsACapNeverACut) {
  const std::string prompt = "Once upon a", completion = " time there was a cat.";
  const int64_t length = static_cast<int64_t>(tokenizer_->encode(prompt + completion, true).size());
  const std::string path = files_.write_lines(
      "long.jsonl", {{{"prompt", "a"}, {"completion", " b"}}, {{"prompt", prompt}, {"completion", completion}}});
  Result<TrainData> exact = load(path, length);
  ASSERT_TRUE(exact.is_ok()) << exact.status().to_string();
  EXPECT_EQ(static_cast<int64_t>(exact->examples[1].ids.size()), length);

  Result<TrainData> over = load(path, length - 1);
  ASSERT_FALSE(over.is_ok());
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find(path + ":2: the example is " + std::to_string(length) +
                                         " tokens, over max_seq_len " + std::to_string(length - 1)),
            std::string::npos)
      << over.status().message();

  EXPECT_FALSE(load(path, 1).is_ok());
  EXPECT_NE(load(path, 1).status().message().find("max_seq_len must be at least 2"), std::string::npos);
}

// A line that cannot fit is refused by its bytes, before it is tokenised (a
// 50 MB line would cost gigabytes of token ids): the message says so, and a
// line within the bound but over max_seq_len still gets the exact count.
TEST_F(TrainDataTest, ALineThatCannotFitIsRefusedBeforeItIsTokenised) {
  const std::string huge(200000, 'x');
  const std::string path = files_.write_lines("huge.jsonl", {{{"prompt", "a"}, {"completion", " b"}},
                                                             {{"prompt", "a"}, {"completion", huge}}});
  Result<TrainData> refused = load(path, 64);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find(path + ":2: "), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("refused before tokenising it"), std::string::npos)
      << refused.status().message();
  // Escapes make the text shorter than the line: judged by the strings' bytes after parsing.
  size_t longest = 1;  // the bound: no token stands for more bytes than this
  for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) longest = std::max(longest, tokenizer_->token_bytes(id).size());
  const size_t n = 64 * longest + 10;  // one byte of prompt and n of completion: over 64 tokens' worth
  std::string escaped;
  for (size_t i = 0; i < n; ++i) escaped += "\\u0078";
  const std::string esc_path = files_.write("escaped.jsonl", "{\"prompt\": \"a\", \"completion\": \"" + escaped + "\"}");
  Result<TrainData> by_text = load(esc_path, 64);
  ASSERT_FALSE(by_text.is_ok());
  EXPECT_NE(by_text.status().message().find("its text of " + std::to_string(n + 1) + " bytes"), std::string::npos)
      << by_text.status().message();
}

TEST_F(TrainDataTest, FilesAreRegularAndConfinedToRoots) {
  Result<TrainData> missing = load(files_.dir() + "/nope.jsonl");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("training file " + files_.dir() + "/nope.jsonl"), std::string::npos);

  Result<TrainData> dir = load(files_.dir());
  ASSERT_FALSE(dir.is_ok());
  EXPECT_NE(dir.status().message().find("is a directory"), std::string::npos);

  const std::string path = files_.write("rooted.jsonl", R"({"prompt": "a", "completion": " b"})");
  const TrainFiles elsewhere;
  Result<TrainData> outside = load(path, 1024, {elsewhere.dir()});
  ASSERT_FALSE(outside.is_ok());
  EXPECT_NE(outside.status().message().find("outside every configured root"), std::string::npos);
  EXPECT_TRUE(load(path, 1024, {files_.dir()}).is_ok());
}

// ---- the real fixtures ----------------------------------------------------------

// The fixtures' train.jsonl lines were built as ids = encode(prompt +
// completion) with BOS, the loss on the tokens past encode(prompt), and
// completion_tokens records how many those are.
TEST(TrainDataFixtures, ScenarioFilesLoadWithTheirCompletionTokenCounts) {
  LG_REQUIRE_SHARED("models/stories260K/tokenizer.json");
  const std::string model = testing::shared_dir() + "/models/stories260K";
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::load(model);
  ASSERT_TRUE(tokenizer.is_ok()) << tokenizer.status().to_string();
  Result<ChatTemplate> chat = ChatTemplate::load(model);
  ASSERT_TRUE(chat.is_ok()) << chat.status().to_string();
  for (const std::string scenario : {"mia", "cat", "sunny"}) {
    const std::string relative = "eval/scenarios/" + scenario + "/train.jsonl";
    LG_REQUIRE_SHARED(relative);
    const std::string path = testing::shared_dir() + "/" + relative;
    Result<TrainData> data = load_train_data(path, **tokenizer, *chat, 512);
    ASSERT_TRUE(data.is_ok()) << data.status().to_string();
    ASSERT_EQ(data->examples.size(), 300u) << scenario;

    std::ifstream in(path);
    std::string line;
    int64_t expected_total = 0;
    for (size_t i = 0; std::getline(in, line); ++i) {
      const json j = json::parse(line);
      const TrainExample& ex = data->examples[i];
      EXPECT_EQ(ex.num_targets(), j["completion_tokens"].get<int64_t>()) << scenario << " line " << i + 1;
      EXPECT_EQ(ex.ids.front(), *(*tokenizer)->bos_id());
      EXPECT_EQ(ex.target.front(), 0);
      EXPECT_EQ(ex.target.back(), 1);
      expected_total += j["completion_tokens"].get<int64_t>();
    }
    EXPECT_EQ(data->target_tokens, expected_total) << scenario;
    Result<std::string> sha = sha256_file(path);
    ASSERT_TRUE(sha.is_ok());
    EXPECT_EQ(data->sha256, sha.value());

    // The longest example sets the smallest max_seq_len the file loads with.
    size_t longest = 0;
    for (size_t i = 0; i < data->examples.size(); ++i) {
      if (data->examples[i].ids.size() > data->examples[longest].ids.size()) longest = i;
    }
    const int64_t cap = static_cast<int64_t>(data->examples[longest].ids.size());
    EXPECT_TRUE(load_train_data(path, **tokenizer, *chat, cap).is_ok());
    Result<TrainData> over = load_train_data(path, **tokenizer, *chat, cap - 1);
    ASSERT_FALSE(over.is_ok());
    EXPECT_NE(over.status().message().find(path + ":" + std::to_string(longest + 1) + ": the example is"),
              std::string::npos)
        << over.status().message();
  }
}

}  // namespace
}  // namespace loragate::train
