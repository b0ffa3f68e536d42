// resolve_inside_roots: absolute paths only, symlinks and ".." resolved, and
// one answer for a path that is missing or outside, so nothing outside leaks.
#include "common/path_roots.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/test_util.h"

namespace loragate {
namespace {

namespace fs = std::filesystem;

class PathRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::canonical(testing::make_temp_dir("lg-roots")).string();
    root_ = tmp_ + "/root";
    fs::create_directories(root_ + "/adapter");
    fs::create_directories(tmp_ + "/outside");
    std::ofstream(tmp_ + "/outside/secret") << "x";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  Result<std::string> resolve(const std::string& path) {
    return resolve_inside_roots(path, {root_}, "adapter", "adapters.roots");
  }

  std::string tmp_, root_;
};

TEST_F(PathRootsTest, InsideGivesTheRealPath) {
  fs::create_directory_symlink(root_ + "/adapter", root_ + "/alias");
  for (const std::string& path : {root_ + "/adapter", root_ + "/./adapter/", root_ + "/alias",
                                  root_ + "/adapter/../adapter", root_}) {
    SCOPED_TRACE(path);
    Result<std::string> r = resolve(path);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(*r, path == root_ ? root_ : root_ + "/adapter");
  }
}

TEST_F(PathRootsTest, RelativePathsAreRefused) {
  fs::current_path(root_);  // even where it would resolve inside
  Result<std::string> r = resolve("adapter");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("relative"), std::string::npos) << r.status().to_string();
  fs::current_path(tmp_);
}

TEST_F(PathRootsTest, MissingAndOutsideGetTheSameAnswer) {
  fs::create_symlink(tmp_ + "/outside/secret", root_ + "/to-existing");
  fs::create_symlink(tmp_ + "/outside/nothing-here", root_ + "/to-missing");
  const std::string cases[] = {
      tmp_ + "/outside/secret",        tmp_ + "/outside/nothing-here", root_ + "/to-existing",
      root_ + "/to-missing",           root_ + "/not-there",           root_ + "/../outside/secret",
      root_ + "x",                     "/proc/self/environ",
  };
  for (const std::string& path : cases) {
    SCOPED_TRACE(path);
    Result<std::string> r = resolve(path);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), "adapter path '" + path +
                                        "' does not exist or is outside every configured adapter root "
                                        "(adapters.roots)");
  }
}

TEST_F(PathRootsTest, NoRootsMeansDisabled) {
  Result<std::string> r = resolve_inside_roots(root_, {}, "adapter", "adapters.roots");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("registration is disabled"), std::string::npos);
}

TEST(PathIsInside, ComponentsNotPrefixes) {
  EXPECT_TRUE(path_is_inside("/a/b", "/a/b"));
  EXPECT_TRUE(path_is_inside("/a/b/c", "/a/b"));
  EXPECT_FALSE(path_is_inside("/a/bc", "/a/b"));
  EXPECT_TRUE(path_is_inside("/a", "/"));
}

}  // namespace
}  // namespace loragate
