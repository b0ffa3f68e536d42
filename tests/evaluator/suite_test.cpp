// Suite loading: the shipped eval sets and held-out rows, a suite file with
// relative paths, the errors that must name file:line and the field (never a
// value of the file), and hostile suites: devices, FIFOs, files outside the
// roots, /proc files, files over the caps, too many scenarios.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>

#include "common/sha256.h"
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
  EXPECT_HAS(eval_error(R"({"id": 7, "prompt": "x", "reference": "y"})"), ":1: id: must be a string, got an integer");
}

TEST_F(SuiteFiles, DuplicateId) {
  std::string path;
  const std::string m = eval_error(std::string(kGood) + "\n" + R"({"id": "b", "prompt": "x", "reference": "y"})" +
                                       "\n" + kGood + "\n",
                                   &path);
  EXPECT_HAS(m, path + ":3: id: duplicate id (first on line 1)");
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
  EXPECT_HAS(m, path + ":1: reference_sentences: must be an integer in [0, 2147483647], got a string");
  EXPECT_HAS(eval_error(R"({"id": "a", "prompt": "x", "reference": "y", "reference_sentences": 2.5})"),
             ":1: reference_sentences: must be an integer");
  EXPECT_HAS(eval_error(R"({"id": "a", "prompt": "x", "reference": "y", "reference_sentences": -1})"),
             ":1: reference_sentences: must be an integer in [0, 2147483647], got one below it");
}

TEST_F(SuiteFiles, BadKeywordType) {
  std::string path;
  const std::string m = eval_error(std::string(kGood) + "\n" +
                                       R"({"id": "b", "prompt": "x", "reference": "y", "keyword": {"type": "foo"}})",
                                   &path);
  EXPECT_HAS(m, path + ":2: keyword.type: unknown type (expected include_exclude, prefix or regex)");
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
             ":1: keyword.include_any[1]: can never match");
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
  EXPECT_HAS(r, path + ":2: keyword.pattern: bad regex at offset 6");
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
             ":1: reference_ids[0]: must be an integer in [0, 2147483647], got one below it");
  EXPECT_HAS(eval_error("\n\n"), ": no items");
  // A number nlohmann cannot hold throws out_of_range, not parse_error (found by fuzz_generic_items).
  EXPECT_HAS(eval_error(R"({"id": "a", "prompt": "x", "reference": "y", "reference_sentences": 1e999})"),
             ":1: invalid JSON: a number out of range");
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
  EXPECT_HAS(dup.status().message(), ":2: id: duplicate id (first on line 1)");
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
  EXPECT_HAS(s2.status().message(),
             nested + ":4: scenarios.a.max_token: unknown key (known: adapter, eval, max_tokens, stop, train, "
                      "train_config)");
}

// An upgrade's keys (loragate upgrade --online): resolved against the suite's directory; an evaluation
// ignores them.
TEST_F(SuiteFiles, UpgradeKeysAreResolvedAgainstTheSuite) {
  file("e.jsonl", std::string(kGood) + "\n");
  const std::string path = file("up.yaml", "scenarios:\n  a: {eval: e.jsonl, adapter: adapters/a, train: data/a.jsonl,"
                                           " train_config: recipe.json}\n  b: {eval: e.jsonl}\n");
  auto suite = load_suite(path);
  ASSERT_TRUE(suite.is_ok()) << suite.status().to_string();
  const std::string dir = std::filesystem::path(path).parent_path().string();
  EXPECT_EQ(suite->scenarios[0].adapter_path, dir + "/adapters/a");
  EXPECT_EQ(suite->scenarios[0].train_path, dir + "/data/a.jsonl");
  EXPECT_EQ(suite->scenarios[0].train_config_path, dir + "/recipe.json");
  EXPECT_EQ(suite->scenarios[1].train_path, "");
  auto bad = load_suite(file("bad.yaml", "scenarios:\n  a: {eval: e.jsonl, train: [x]}\n"));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_HAS(bad.status().message(), "scenarios.a.train: must be a non-empty string");
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
             "s.yaml:2: scenarios.a.max_tokens: must be an integer in [1, 65536]");
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

// ---- hostile suites: what an admin client could name -----------------------------------

// Seconds `f` took.
template <typename F>
double seconds_of(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST_F(SuiteFiles, ErrorsNeverQuoteTheFile) {
  // Not JSON: nlohmann's message would quote the bytes it last read.
  const std::string secret = file("secret.txt", "SECRETVALUE:$6$salt$hash:19000:0:99999:7:::\n");
  auto items = load_eval_items(secret);
  ASSERT_FALSE(items.is_ok());
  const std::string m = items.status().message();
  EXPECT_HAS(m, secret + ":1: invalid JSON at column 1");
  EXPECT_EQ(m.find("SECRET"), std::string::npos) << m;
  EXPECT_EQ(m.find("last read"), std::string::npos) << m;
  EXPECT_EQ(m.find("'S'"), std::string::npos) << m;
  // JSON whose values are wrong: the kind of value, not the value.
  for (const char* line : {R"({"id": "a", "prompt": 987654321, "reference": "y"})",
                           R"({"id": "a", "prompt": "x", "reference": "y", "keyword": {"type": "987654321"}})",
                           R"({"id": "a", "prompt": "x", "reference": "y", "reference_ids": [987654321987654321]})",
                           R"({"id": "a", "prompt": "x", "reference": "y",)"
                           R"( "keyword": {"type": "regex", "pattern": "(987654321"}})",
                           R"({"id": "a", "prompt": "x", "reference": "y", "keyword": {"type": "prefix", "$6$987654321": 1}})",
                           R"({"id": "987654321", "prompt": "x", "reference": "y"})" "\n"
                           R"({"id": "987654321", "prompt": "x", "reference": "y"})",
                           R"("987654321")"}) {
    const std::string error = eval_error(line);
    EXPECT_EQ(error.find("987654321"), std::string::npos) << error;
  }
  // A suite YAML that is not one.
  auto suite = load_suite(file("s.yaml", "scenarios:\n  a: {eval: e.jsonl, max_tokens: SECRETVALUE}\n"));
  ASSERT_FALSE(suite.is_ok());
  EXPECT_EQ(suite.status().message().find("SECRET"), std::string::npos) << suite.status().message();
  // Keys are named when they are plain names (a misspelt key), never otherwise.
  auto key = load_suite(file("k.yaml", "root:$6$SECRETVALUE: 1\nscenarios:\n  a: {eval: e.jsonl}\n"));
  ASSERT_FALSE(key.is_ok());
  EXPECT_HAS(key.status().message(), "unknown key");
  EXPECT_EQ(key.status().message().find("SECRET"), std::string::npos) << key.status().message();
}

TEST_F(SuiteFiles, DeviceIsRefusedAtOnce) {
  const std::string path = file("s.yaml", "scenarios:\n  a: {eval: /dev/zero}\n");
  Result<Suite> suite = Status::internal("not loaded");
  // Read as today's loader did, /dev/zero never ends: the refusal must come before a byte is read.
  EXPECT_LT(seconds_of([&] { suite = load_suite(path); }), 1.0);
  ASSERT_FALSE(suite.is_ok());
  EXPECT_HAS(suite.status().message(), "eval file /dev/zero is not a regular file");
  auto direct = load_generic_items("/dev/urandom");
  ASSERT_FALSE(direct.is_ok());
  EXPECT_HAS(direct.status().message(), "is not a regular file");
  auto dir = load_eval_items(dir_);
  ASSERT_FALSE(dir.is_ok());
  EXPECT_HAS(dir.status().message(), "is a directory");
}

TEST_F(SuiteFiles, FifoIsRefusedWithoutWaitingForAWriter) {
  const std::string fifo = dir_ + "/items.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string path = file("s.yaml", "scenarios:\n  a: {eval: items.fifo}\n");
  auto loading = std::async(std::launch::async, [&] { return load_suite(path); });
  if (loading.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    // Blocked in open(): be the writer it waits for, so the test ends, and fail.
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
    FAIL() << "loading a suite that names a FIFO blocked";
  }
  Result<Suite> suite = loading.get();
  ASSERT_FALSE(suite.is_ok());
  EXPECT_HAS(suite.status().message(), "is not a regular file");
}

TEST_F(SuiteFiles, ProcFilesAreRefused) {
  for (const char* proc : {"/proc/self/environ", "/proc/self/status", "/proc/cpuinfo"}) {
    auto items = load_eval_items(proc);
    ASSERT_FALSE(items.is_ok()) << proc;
    EXPECT_HAS(items.status().message(), "is a pseudo-file of the kernel");
  }
}

TEST_F(SuiteFiles, EveryNamedFileMustLieInsideTheRoots) {
  const std::string root = dir_ + "/root";
  const std::string inside = file("root/e.jsonl", std::string(kGood) + "\n");
  const std::string outside = file("outside/secret.jsonl", "TOPSECRET\n");
  fs::create_symlink(outside, root + "/link.jsonl");
  const std::vector<std::string> roots = {root};
  auto ok = load_suite(file("root/ok.yaml", "scenarios:\n  a: {eval: e.jsonl}\n"), roots);
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok->scenarios[0].eval_path, fs::canonical(inside).string());
  for (const std::string& named : {outside, std::string("../outside/secret.jsonl"), std::string("link.jsonl"),
                                   std::string("/etc/shadow"), std::string("/proc/self/environ"),
                                   std::string("/dev/zero"), std::string("missing.jsonl")}) {
    for (const std::string& key : {std::string("scenarios:\n  a: {eval: E}\n"),
                                   std::string("scenarios:\n  a: {eval: e.jsonl}\ngeneric: E\n")}) {
      std::string text = key;
      text.replace(text.find('E'), 1, named);
      const std::string path = file("root/s.yaml", text);
      // Refused in the first phase: the YAML, before any file it names is opened.
      auto spec = read_suite_spec(path, roots);
      ASSERT_FALSE(spec.is_ok()) << named;
      const std::string m = spec.status().message();
      EXPECT_HAS(m, "does not exist or is outside every configured evaluation root (evaluation.roots)");
      EXPECT_EQ(m.find("TOPSECRET"), std::string::npos) << m;
      EXPECT_FALSE(load_suite(path, roots).is_ok()) << named;
    }
  }
  // Without roots (loragate eval run) a file outside is read; a bad one is still not quoted.
  auto offline = load_suite(file("root/s.yaml", "scenarios:\n  a: {eval: ../outside/secret.jsonl}\n"));
  ASSERT_FALSE(offline.is_ok());
  EXPECT_HAS(offline.status().message(), "secret.jsonl:1: invalid JSON");
  EXPECT_EQ(offline.status().message().find("TOPSECRET"), std::string::npos) << offline.status().message();
  // The suite itself, read with roots, must lie inside them too.
  EXPECT_FALSE(load_suite(file("outside/s.yaml", "scenarios:\n  a: {eval: ../root/e.jsonl}\n"), roots).is_ok());
}

TEST_F(SuiteFiles, SpecPhaseReadsNoItemFile) {
  const std::string path = file("s.yaml", "scenarios:\n  a: {eval: e.jsonl}\n  b: {eval: nowhere.jsonl}\n");
  auto spec = read_suite_spec(path);
  ASSERT_TRUE(spec.is_ok()) << spec.status().to_string();
  ASSERT_EQ(spec->scenarios.size(), 2u);
  EXPECT_TRUE(spec->scenarios[0].items.empty());
  EXPECT_TRUE(spec->content_sha256.empty());
  file("e.jsonl", std::string(kGood) + "\n");
  Suite suite = *spec;
  const Status items = load_suite_items(&suite);
  ASSERT_FALSE(items.is_ok());
  EXPECT_EQ(items.code(), StatusCode::kNotFound) << items.to_string();
  EXPECT_HAS(items.message(), "nowhere.jsonl");
}

TEST_F(SuiteFiles, FilesOverTheCapsAreRefused) {
  // A sparse file: its size says it is over the cap, and nothing of it is read.
  const std::string big = dir_ + "/big.jsonl";
  { std::ofstream(big) << kGood << "\n"; }
  fs::resize_file(big, static_cast<uintmax_t>(kMaxItemFileBytes) + 1);
  Result<std::vector<EvalItem>> items = Status::internal("not loaded");
  EXPECT_LT(seconds_of([&] { items = load_eval_items(big); }), 1.0);
  ASSERT_FALSE(items.is_ok());
  EXPECT_HAS(items.status().message(), "is 67108865 bytes, over the limit of 67108864 bytes");
  const std::string yaml = file("big.yaml", "scenarios:\n  a: {eval: e.jsonl}\n");
  fs::resize_file(yaml, static_cast<uintmax_t>(kMaxSuiteFileBytes) + 1);
  EXPECT_FALSE(load_suite(yaml).is_ok());
  // One line over the line cap.
  std::string line = R"({"id": "a", "prompt": ")" + std::string(kMaxLineBytes, 'x') + R"(", "reference": "y"})";
  EXPECT_HAS(eval_error(line + "\n"), ":1: the line is");
  // One item over the item cap.
  std::string many;
  for (size_t i = 0; i <= kMaxItemsPerFile; ++i) {
    many += R"({"id": "i)" + std::to_string(i) + R"(", "prompt": "x", "reference": "y"})" "\n";
  }
  EXPECT_HAS(eval_error(many), ":10001: more than 10000 items in one eval file");
  many.resize(many.rfind('{'));  // exactly the cap loads
  auto at_cap = load_eval_items(file("cap.jsonl", many));
  ASSERT_TRUE(at_cap.is_ok()) << at_cap.status().to_string();
  EXPECT_EQ(at_cap->size(), kMaxItemsPerFile);
}

TEST_F(SuiteFiles, TooManyScenariosAreRefusedBeforeAnyIsRead) {
  auto suite_of = [&](size_t n) {
    std::string text = "scenarios:\n";
    for (size_t i = 0; i < n; ++i) text += "  s" + std::to_string(i) + ": {eval: /dev/zero}\n";
    return file("many.yaml", text);
  };
  Result<Suite> spec = Status::internal("not loaded");
  const std::string huge = suite_of(10000);
  EXPECT_LT(seconds_of([&] { spec = read_suite_spec(huge); }), 2.0);
  ASSERT_FALSE(spec.is_ok());
  EXPECT_HAS(spec.status().message(), "many.yaml:2: scenarios: 10000 scenarios, over the limit of 64");
  EXPECT_FALSE(read_suite_spec(suite_of(kMaxScenarios + 1)).is_ok());
  auto at_cap = read_suite_spec(suite_of(kMaxScenarios));
  ASSERT_TRUE(at_cap.is_ok()) << at_cap.status().to_string();
  EXPECT_EQ(at_cap->scenarios.size(), kMaxScenarios);
}

TEST_F(SuiteFiles, ContentHashCoversEveryNamedFile) {
  const std::string e = file("e.jsonl", std::string(kGood) + "\n");
  const std::string g = file("g.jsonl", "{\"id\": \"g1\", \"ids\": [1, 2]}\n");
  const std::string path = file("s.yaml", "scenarios:\n  a: {eval: e.jsonl}\ngeneric: g.jsonl\n");
  auto first = load_suite(path);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  ASSERT_EQ(first->content_sha256.size(), 64u);
  EXPECT_EQ(suite_sha256(*first), first->content_sha256);
  EXPECT_NE(first->content_sha256, sha256_hex(first->text));
  auto again = load_suite(path);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->content_sha256, first->content_sha256);
  // The same YAML with an edited eval file, or an edited generic file, is another suite.
  file("e.jsonl", std::string(kGood) + "\n" + R"({"id": "b", "prompt": "x", "reference": "y"})" + "\n");
  auto edited = load_suite(path);
  ASSERT_TRUE(edited.is_ok());
  EXPECT_NE(edited->content_sha256, first->content_sha256);
  file("g.jsonl", "{\"id\": \"g1\", \"ids\": [1, 3]}\n");
  auto generic = load_suite(path);
  ASSERT_TRUE(generic.is_ok());
  EXPECT_NE(generic->content_sha256, edited->content_sha256);
}

}  // namespace
}  // namespace loragate::eval
