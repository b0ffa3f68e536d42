// Names of adapters, scenarios and bases travel in URL paths and queries:
// only [A-Za-z0-9._-] (and '/' in base names), no "." / ".." / empty part.
#include <gtest/gtest.h>

#include "registry/records.h"

namespace loragate {
namespace {

TEST(NamesTest, OnlyPlainCharactersAndNoDotSegments) {
  for (const char* ok : {"support-bot", "a.b", "v1_2", "Llama-3.2-1B", "x..y"}) {
    EXPECT_TRUE(validate_name("adapter name", ok, false).is_ok()) << ok;
  }
  EXPECT_TRUE(validate_name("base model name", "meta-llama/Llama-3.2-1B", true).is_ok());
  // '?' made DELETE /admin/adapters/victim?x remove "victim"; '%' could not be removed at all.
  for (const char* bad : {"victim?x", "a#b", "a%41", ".", "..", "has space", "é", "a/b", "a:b", ""}) {
    Status s = validate_name("adapter name", bad, false);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
  }
  for (const char* bad : {"a/../b", "a//b", "/a", "a/", "./a"}) {
    EXPECT_FALSE(validate_name("base model name", bad, true).is_ok()) << bad;
  }
  EXPECT_NE(validate_name("adapter name", "a?b", false).message().find("letters, digits"), std::string::npos);
}

}  // namespace
}  // namespace loragate
