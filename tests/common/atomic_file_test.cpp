// write_file_atomic: the whole new content or the old, no temporaries left.
#include "common/atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/test_util.h"

namespace loragate {
namespace {

namespace fs = std::filesystem;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

TEST(AtomicFile, WritesAndReplaces) {
  const std::string dir = testing::make_temp_dir("lg-atomic");
  const std::string path = dir + "/f.json";
  ASSERT_TRUE(write_file_atomic(path, "first").is_ok());
  EXPECT_EQ(read_all(path), "first");
  ASSERT_TRUE(write_file_atomic(path, std::string("a\0b", 3)).is_ok());
  EXPECT_EQ(read_all(path), std::string("a\0b", 3));
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) entries += e.is_regular_file() ? 1 : 100;
  EXPECT_EQ(entries, 1);  // no temporary left beside it
  EXPECT_TRUE(sync_directory(dir).is_ok());
  fs::remove_all(dir);
}

TEST(AtomicFile, FailsNamingThePath) {
  const std::string dir = testing::make_temp_dir("lg-atomic");
  auto s = write_file_atomic(dir + "/missing/f.json", "x");
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("missing/f.json"), std::string::npos) << s.message();
  EXPECT_FALSE(sync_directory(dir + "/missing").is_ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace loragate
