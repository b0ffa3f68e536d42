// Suite loading: the shipped eval sets and held-out rows, a suite file with
// relative paths, and the errors that must name file:line and the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "evaluator/suite.h"
#include "tests/test_util.h"

namespace loragate::eval {
namespace {

namespace fs = std::filesystem;

std::string shared(const std::string& relative) { return testing::shared_dir() + "/" + relative; }

std::string write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

class SuiteFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("lg-suite-test");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `text` as `name` under the temp dir; returns its path.
  std::string file(const std::string& name, const std::string& text) { return write(fs::path(dir_) / name, text); }

  // The error message of loading `text` as an eval file (the test fails when it loads).
  std::string eval_error(const std::string& text, std::string* path_out = nullptr) {
    const std::string path = file("items.jsonl", text);
    if (path_out) *path_out = path;
    auto items = load_eval_items(path);
    EXPECT_FALSE(items.is_ok()) << "loaded: " << text;
    return items.is_ok() ? "" : items.status().message();
  }

  std::string dir_;
};

const char* kGood = R"({"id": "a", "prompt": "Once", "reference": " upon a time."})";

// ---- the shipped data ----------------------------------------------------------------

TEST(SuiteShipped, EvalSetsAndHeldout) {
  LG_REQUIRE_SHARED("eval/scenarios/mia/eval.jsonl");
  for (const char* s : {"mia", "cat", "sunny"}) {
    auto items = load_eval_items(shared(std::string("eval/scenarios/") + s + "/eval.jsonl"));
    ASSERT_TRUE(items.is_ok()) << items.status().to_string();
    ASSERT_EQ(items->size(), 40u) << s;
    const EvalItem& first = items->front();
    EXPECT_EQ(first.id, std::string(s) + "-000");
    EXPECT_FALSE(first.prompt.empty());
    EXPECT_TRUE(first.messages.is_null());
    EXPECT_EQ(first.prompt_ids.front(), 1);  // BOS
    EXPECT_FALSE(first.reference.empty());
    EXPECT_FALSE(first.reference_ids.empty());
    EXPECT_GE(first.reference_sentences, 1);
    EXPECT_NE(first.keyword.type, KeywordRule::Type::kNone);
  }
  auto cat = load_eval_items(shared("eval/scenarios/cat/eval.jsonl"));
  ASSERT_TRUE(cat.is_ok());
  EXPECT_EQ(cat->front().keyword.type, KeywordRule::Type::kIncludeExclude);
  EXPECT_EQ(cat->front().keyword.include_any, (std::vector<std::string>{"cat", "cats", "Cat", "Cats"}));
  EXPECT_EQ(cat->front().keyword.exclude.size(), 178u);
  EXPECT_EQ(cat->front().reference_sentences, 3);
  auto sunny = load_eval_items(shared("eval/scenarios/sunny/eval.jsonl"));
  ASSERT_TRUE(sunny.is_ok());
  EXPECT_EQ(sunny->front().keyword.type, KeywordRule::Type::kPrefix);
  EXPECT_EQ(sunny->front().keyword.prefix, "The sun was shining.");

  auto generic = load_generic_items(shared("eval/generic/heldout.jsonl"));
  ASSERT_TRUE(generic.is_ok()) << generic.status().to_string();
  ASSERT_EQ(generic->size(), 32u);
  for (const GenericItem& row : *generic) {
    EXPECT_EQ(row.ids.size(), 128u) << row.id;  // BOS + 127
    EXPECT_EQ(row.ids.front(), 1);
    EXPECT_TRUE(row.text.empty());
  }
}

TEST_F(SuiteFiles, SuiteWithRelativePaths) {
  LG_REQUIRE_SHARED("eval/scenarios/mia/eval.jsonl");
  for (const char* s : {"mia", "cat", "sunny"}) {
    const fs::path to = fs::path(dir_) / "scenarios" / s / "eval.jsonl";
    fs::create_directories(to.parent_path());
    fs::copy_file(shared(std::string("eval/scenarios/") + s + "/eval.jsonl"), to);
  }
  fs::create_directories(fs::path(dir_) / "generic");
  fs::copy_file(shared("eval/generic/heldout.jsonl"), fs::path(dir_) / "generic" / "heldout.jsonl");
  const std::string text =
      "# base swap suite\n"
      "scenarios:\n"
      "  mia: {eval: scenarios/mia/eval.jsonl}\n"
      "  cat:\n"
      "    eval: ./scenarios/cat/eval.jsonl\n"
      "    max_tokens: 32\n"
      "    stop: [\"\\n\\n\", \"The end\"]\n"
      "  sunny: {eval: scenarios/../scenarios/sunny/eval.jsonl}\n"
      "generic: generic/heldout.jsonl\n";
  const std::string path = file("suite.yaml", text);
  auto suite = load_suite(path);
  ASSERT_TRUE(suite.is_ok()) << suite.status().to_string();
  EXPECT_EQ(suite->path, path);
  EXPECT_EQ(suite->text, text);
  ASSERT_EQ(suite->scenarios.size(), 3u);
  // File order, not alphabetical.
  EXPECT_EQ(suite->scenarios[0].name, "mia");
  EXPECT_EQ(suite->scenarios[1].name, "cat");
  EXPECT_EQ(suite->scenarios[2].name, "sunny");
  EXPECT_EQ(suite->scenarios[0].eval_path, (fs::path(dir_) / "scenarios/mia/eval.jsonl").string());
  EXPECT_EQ(suite->scenarios[1].eval_path, (fs::path(dir_) / "scenarios/cat/eval.jsonl").string());
  EXPECT_EQ(suite->scenarios[2].eval_path, (fs::path(dir_) / "scenarios/sunny/eval.jsonl").string());
  EXPECT_EQ(suite->scenarios[0].max_tokens, 48);
  EXPECT_TRUE(suite->scenarios[0].stop.empty());
  EXPECT_EQ(suite->scenarios[1].max_tokens, 32);
  EXPECT_EQ(suite->scenarios[1].stop, (std::vector<std::string>{"\n\n", "The end"}));
  for (const ScenarioSpec& s : suite->scenarios) EXPECT_EQ(s.items.size(), 40u) << s.name;
  EXPECT_EQ(suite->generic_path, (fs::path(dir_) / "generic/heldout.jsonl").string());
  EXPECT_EQ(suite->generic.size(), 32u);
}

TEST_F(SuiteFiles, AbsolutePathsAndNoGeneric) {
  const std::string items = file("elsewhere/items.jsonl", std::string(kGood) + "\n");
  const std::string path = file("suites/s.yaml", "scenarios:\n  one:\n    eval: " + items + "\n");
  auto suite = load_suite(path);
  ASSERT_TRUE(suite.is_ok()) << suite.status().to_string();
  ASSERT_EQ(suite->scenarios.size(), 1u);
  EXPECT_EQ(suite->scenarios[0].eval_path, items);
  EXPECT_EQ(suite->generic_path, "");
  EXPECT_TRUE(suite->generic.empty());
}

TEST_F(SuiteFiles, ItemForms) {
  const std::string path = file("items.jsonl",
                                std::string(kGood) + "\n"
                                "\n"  // blank lines are skipped
                                R"({"id": "b", "messages": [{"role": "system", "content": "Be brief."},)"
                                R"( {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],)"
                                R"( "reference": "Hello.", "keyword": {"type": "regex", "pattern": "^\\s*Hel+o"},)"
                                R"( "online_main_name": "Lily", "extra": {"any": 1}})" "\r\n"
                                R"({"id": "c", "prompt": "X", "prompt_ids": [1, 5], "reference": "",)"
                                R"( "reference_ids": [], "reference_sentences": 0, "keyword": null})" "\n");
  auto items = load_eval_items(path);
  ASSERT_TRUE(items.is_ok()) << items.status().to_string();
  ASSERT_EQ(items->size(), 3u);
  EXPECT_EQ((*items)[0].prompt, "Once");
  EXPECT_EQ((*items)[0].reference_sentences, 0);
  EXPECT_EQ((*items)[1].prompt, "");
  ASSERT_TRUE((*items)[1].messages.is_array());
  EXPECT_EQ((*items)[1].messages.size(), 2u);
  EXPECT_EQ((*items)[1].keyword.type, KeywordRule::Type::kRegex);
  EXPECT_EQ((*items)[1].keyword.pattern, "^\\s*Hel+o");
  EXPECT_EQ((*items)[2].prompt_ids, (std::vector<int32_t>{1, 5}));
  EXPECT_EQ((*items)[2].keyword.type, KeywordRule::Type::kNone);

  const std::string generic = file("generic.jsonl", "{\"id\": \"g1\", \"ids\": [1, 2, 3]}\n"
                                                    "{\"id\": \"g2\", \"text\": \"Once upon a time.\"}\n");
  auto rows = load_generic_items(generic);
  ASSERT_TRUE(rows.is_ok()) << rows.status().to_string();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ((*rows)[1].text, "Once upon a time.");
}

// ---- errors: file:line: field: what -------------------------------------------------------

#define EXPECT_HAS(message, part) EXPECT_NE((message).find(part), std::string::npos) << (message)

TEST_F(SuiteFiles, MissingId) {
  std::string path;
  const std::string m = eval_error(std::string(kGood) + "\n" + R"({"prompt": "x", "reference": "y"})" "\n", &path);
  EXPECT_HAS(m, path + ":2: id: missing");
  EXPECT_HAS(eval_error(R"({"id": 7, "prompt": "x", "reference": "y"})"), ":1: id: must be a string, got 7");
}

TEST_F(SuiteFiles, DuplicateId) {
  std::string path;
  const std::string m = eval_error(std::string(kGood) + "\n" + R"({"id": "b", "prompt": "x", "reference": "y"})" +
                                       "\n" + kGood + "\n",
                                   &path);
  EXPECT_HAS(m, path + ":3: id: duplicate id 'a' (first on line 1)");
}

TEST_F(SuiteFiles, BadJsonLine) {
  std::string path;
  const std::string m = eval_error(std::string(kGood) + "\n" + R"({"id": "b", "prompt": )" + "\n", &path);
  EXPECT_HAS(m, path + ":2: invalid JSON");
  EXPECT_HAS(eval_error("[1, 2]\n"), ":1: must be a JSON object");
}

TEST_F(SuiteFiles, WrongTypeOfReferenceSentences) {
  std::string path;
  const std::string m =
      eval_error(R"({"id": "a", "prompt": "x", "reference": "y", "reference_sentences": "2"})", &path);
  EXPECT_HAS(m, path + ":1: reference_sentences: must be an integer in [0, 2147483647], got \"2\"");
  EXPECT_HAS(eval_error(R"({"id": "a", "prompt": "x", "reference": "y", "reference_sentences": 2.5})"),
             ":1: reference_sentences: must be an integer");
  EXPECT_HAS(eval_error(R"({"id": "a", "prompt": "x", "reference": "y", "reference_sentences": -1})"),
             ":1: reference_sentences: must be an integer in [0, 2147483647], got -1");
}

TEST_F(SuiteFiles, BadKeywordType) {
  std::string path;
  const std::string m = eval_error(std::string(kGood) + "\n" +
                                       R"({"id": "b", "prompt": "x", "reference": "y", "keyword": {"type": "foo"}})",
                                   &path);
  EXPECT_HAS(m, path + ":2: keyword.type: unknown type 'foo' (expected include_exclude, prefix or regex)");
  EXPECT_HAS(eval_error(R"({"id": "a", "prompt": "x", "reference": "y", "keyword": {"include_any": ["a"]}})"),
             ":1: keyword.type: missing");
  EXPECT_HAS(eval_error(R"({"id": "a", "prompt": "x", "reference": "y", "keyword": "Mia"})"),
             ":1: keyword: must be an object");
}

TEST_F(SuiteFiles, BadKeywordFields) {
  EXPECT_HAS(eval_error(R"({"id": "a", "prompt": "x", "reference": "y",)"
                        R"( "keyword": {"type": "include_exclude", "include_any": ["Mia"], "exlude": ["Lily"]}})"),
             ":1: keyword.exlude: unknown key for type include_exclude (known: exclude, include_any, type)");
  EXPECT_HAS(eval_error(R"({"id": "a", "prompt": "x", "reference": "y",)"
                        R"( "keyword": {"type": "include_exclude", "include_any": ["Mia", "big cat"]}})"),
             ":1: keyword.include_any[1]: 'big cat' can never match");
  EXPECT_HAS(eval_error(R"({"id": "a", "prompt": "x", "reference": "y",)"
                        R"( "keyword": {"type": "include_exclude", "include_any": []}})"),
             ":1: keyword.include_any: must be a non-empty list");
  EXPECT_HAS(eval_error(R"({"id": "a", "prompt": "x", "reference": "y", "keyword": {"type": "prefix"}})"),
             ":1: keyword.prefix: must be a non-empty string");
}

TEST_F(SuiteFiles, BadRegex) {
  std::string path;
  const std::string r = eval_error(
      std::string(kGood) + "\n" +
          R"({"id": "b", "prompt": "x", "reference": "y", "keyword": {"type": "regex", "pattern": "(cats?"}})" + "\n",
      &path);
  EXPECT_HAS(r, path + ":2: keyword.pattern: bad regex /(cats?/ at offset 6");
  EXPECT_HAS(eval_error(R"({"id": "a", "prompt": "x", "reference": "y",)"
                        R"( "keyword": {"type": "regex", "pattern": "[z-a]"}})"),
             ":1: keyword.pattern: bad regex");
}

TEST_F(SuiteFiles, OtherItemErrors) {
  EXPECT_HAS(eval_error(R"({"id": "a", "reference": "y"})"), ":1: prompt: missing (give prompt or messages)");
  EXPECT_HAS(eval_error(R"({"id": "a", "prompt": "x", "messages": [], "reference": "y"})"),
             ":1: messages: give prompt or messages, not both");
  EXPECT_HAS(eval_error(R"({"id": "a", "messages": [{"role": "robot", "content": "x"}], "reference": "y"})"),
             ":1: messages[0].role: must be one of");
  EXPECT_HAS(eval_error(R"({"id": "a", "prompt": "x"})"), ":1: reference: missing");
  EXPECT_HAS(eval_error(R"({"id": "a", "prompt": "x", "reference": "y", "prompt_ids": [1, "2"]})"),
             ":1: prompt_ids[1]: must be an integer");
  EXPECT_HAS(eval_error(R"({"id": "a", "prompt": "x", "reference": "y", "reference_ids": [-3]})"),
             ":1: reference_ids[0]: must be an integer in [0, 2147483647], got -3");
  EXPECT_HAS(eval_error("\n\n"), ": no items");
  auto missing = load_eval_items(dir_ + "/nope.jsonl");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST_F(SuiteFiles, GenericErrors) {
  const std::string path =
      file("g.jsonl", "{\"id\": \"g1\", \"ids\": [1, 2]}\n{\"id\": \"g2\", \"ids\": [1, \"x\"]}\n");
  auto rows = load_generic_items(path);
  ASSERT_FALSE(rows.is_ok());
  EXPECT_HAS(rows.status().message(), path + ":2: ids[1]: must be an integer");
  auto both = load_generic_items(file("g2.jsonl", "{\"id\": \"g1\", \"ids\": [1], \"text\": \"x\"}\n"));
  ASSERT_FALSE(both.is_ok());
  EXPECT_HAS(both.status().message(), ":1: text: give ids or text, not both");
  auto dup = load_generic_items(file("g3.jsonl", "{\"id\": \"g\", \"ids\": [1]}\n{\"id\": \"g\", \"text\": \"x\"}\n"));
  ASSERT_FALSE(dup.is_ok());
  EXPECT_HAS(dup.status().message(), ":2: id: duplicate id 'g' (first on line 1)");
}

TEST_F(SuiteFiles, UnknownSuiteKey) {
  const std::string items = file("e.jsonl", std::string(kGood) + "\n");
  const std::string top = file("top.yaml", "scenarios:\n  a: {eval: e.jsonl}\ngeneric_set: g.jsonl\n");
  auto s1 = load_suite(top);
  ASSERT_FALSE(s1.is_ok());
  EXPECT_HAS(s1.status().message(), top + ":3: generic_set: unknown key (known: generic, scenarios)");
  const std::string nested = file("nested.yaml", "scenarios:\n  a:\n    eval: e.jsonl\n    max_token: 8\n");
  auto s2 = load_suite(nested);
  ASSERT_FALSE(s2.is_ok());
  EXPECT_HAS(s2.status().message(), nested + ":4: scenarios.a.max_token: unknown key (known: eval, max_tokens, stop)");
}

TEST_F(SuiteFiles, OtherSuiteErrors) {
  file("e.jsonl", std::string(kGood) + "\n");
  auto load = [&](const std::string& text) {
    auto suite = load_suite(file("s.yaml", text));
    EXPECT_FALSE(suite.is_ok()) << text;
    return suite.is_ok() ? std::string() : suite.status().message();
  };
  EXPECT_HAS(load("scenarios:\n  a: {max_tokens: 4}\n"), "s.yaml:2: scenarios.a.eval: missing");
  EXPECT_HAS(load("scenarios:\n  a: {eval: e.jsonl, max_tokens: many}\n"),
             "s.yaml:2: scenarios.a.max_tokens: must be an integer in [1, 65536], got 'many'");
  EXPECT_HAS(load("scenarios:\n  a: {eval: e.jsonl, max_tokens: 0}\n"), "scenarios.a.max_tokens: must be an integer");
  EXPECT_HAS(load("scenarios:\n  a: {eval: e.jsonl, stop: \"\\n\"}\n"), "s.yaml:2: scenarios.a.stop: must be a list");
  EXPECT_HAS(load("scenarios:\n  generic: {eval: e.jsonl}\n"), "s.yaml:2: scenarios: 'generic' is not a usable");
  EXPECT_HAS(load("scenarios: {}\n"), "s.yaml:1: scenarios: must map at least one scenario");
  EXPECT_HAS(load("generic: e.jsonl\n"), "scenarios: must map at least one scenario");
  EXPECT_HAS(load("scenarios: [a, b]\n"), "scenarios: must map at least one scenario");
  EXPECT_HAS(load("scenarios:\n  a: {eval: e.jsonl\n"), "s.yaml:3: invalid YAML");
  // An error inside a named eval file names that file.
  const std::string bad = file("bad.jsonl", std::string(kGood) + "\n{\"id\": \"b\", \"prompt\": \"x\"}\n");
  EXPECT_HAS(load("scenarios:\n  a: {eval: bad.jsonl}\n"), bad + ":2: reference: missing");
  auto missing = load_suite(dir_ + "/none.yaml");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace loragate::eval
