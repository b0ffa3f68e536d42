// Structured output against the official JSON Schema test suite (Debian's
// json-schema-test-suite, draft 7): for every schema loragate compiles, no
// instance the suite calls invalid may be a sentence of its grammar — a
// constrained decoder must never be able to write it. Schemas with keywords
// loragate refuses are counted, not failed; so are valid instances the
// grammar does not produce (a grammar may be stricter: key order, no
// additional properties unless asked, no whitespace).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "tests/test_util.h"

namespace loragate::grammar {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

constexpr const char* kSuiteDir = "/usr/share/json-schema-test-suite/tests/draft7";

TEST(JsonSchemaSuiteTest, NoInvalidInstanceIsASentenceOfItsSchemasGrammar) {
  if (!fs::is_directory(kSuiteDir)) {
    const std::string why = std::string(kSuiteDir) + " is missing (Debian's json-schema-test-suite; scripts/setup.sh installs it)";
    if (testing::in_ci()) GTEST_FAIL() << why;
    GTEST_SKIP() << why;
  }
  int compiled = 0, refused = 0, invalid_checked = 0, valid_accepted = 0, valid_total = 0;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kSuiteDir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    std::ifstream in(file);
    const ojson groups = ojson::parse(in);
    for (const ojson& group : groups) {
      auto g = compile_json_schema(group["schema"], {});
      if (!g.is_ok()) {
        ++refused;
        continue;
      }
      ++compiled;
      const auto grammar = std::make_shared<const Grammar>(std::move(g).value());
      for (const ojson& t : group["tests"]) {
        const bool accepted = grammar_matches(grammar, t["data"].dump());
        if (t["valid"].get<bool>()) {
          ++valid_total;
          valid_accepted += accepted ? 1 : 0;
        } else {
          ++invalid_checked;
          EXPECT_FALSE(accepted) << file.filename().string() << ": \"" << group["description"].get<std::string>()
                                 << "\" / \"" << t["description"].get<std::string>() << "\": the grammar accepts "
                                 << t["data"].dump() << ", which the suite calls invalid";
        }
      }
    }
  }
  std::cout << "json-schema-test-suite draft7: " << compiled << " schemas compiled, " << refused
            << " refused (unsupported keywords); " << invalid_checked << " invalid instances all refused; "
            << valid_accepted << " of " << valid_total << " valid instances producible\n";
  EXPECT_GE(compiled, 40) << "the suite check would be nearly vacuous";
  EXPECT_GE(invalid_checked, 80);
}

}  // namespace
}  // namespace loragate::grammar
