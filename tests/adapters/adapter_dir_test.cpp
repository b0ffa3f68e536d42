// Adapter files confined to their directory: links out of it are refused,
// before anything is read, with one message whether the target exists or not.
#include "adapters/adapter_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "adapters/lora_adapter.h"
#include "tests/adapters/adapter_fixtures.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

namespace fs = std::filesystem;

class AdapterDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::canonical(testing::make_temp_dir("lg-adapter-dir")).string();
    dir_ = tmp_ + "/tenant";
    other_ = tmp_ + "/other";
    fs::create_directories(dir_);
    fs::create_directories(other_);
    ASSERT_TRUE(testing::write_adapter(other_, testing::lora_config(2, 2, {"q_proj"}),
                                       testing::fake_adapter(base_, {LoraModule::kQ}, 2))
                    .is_ok());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  Result<std::shared_ptr<const LoraAdapter>> load(const std::string& confined_to = "") {
    return LoraAdapter::load(dir_, base_, 8, confined_to);
  }
  static std::string outside_message(const std::string& shown) {
    return shown + ": resolves outside the adapter directory; every adapter file must lie inside it";
  }

  std::string tmp_, dir_, other_;
  ModelConfig base_ = testing::tiny_base();
};

TEST_F(AdapterDirTest, ConfigLinkedOutsideIsRefusedWhetherItsTargetExistsOrNot) {
  fs::copy_file(other_ + "/adapter_model.safetensors", dir_ + "/adapter_model.safetensors");
  for (const std::string target : {"/proc/self/environ", "/nonexistent/adapter_config.json",
                                   "../other/adapter_config.json"}) {
    SCOPED_TRACE(target);
    fs::remove(dir_ + "/adapter_config.json");
    fs::create_symlink(target, dir_ + "/adapter_config.json");
    auto r = load();
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), outside_message(dir_ + "/adapter_config.json"));
  }
}

TEST_F(AdapterDirTest, WeightsLinkedOutsideAreRefused) {
  fs::copy_file(other_ + "/adapter_config.json", dir_ + "/adapter_config.json");
  fs::create_symlink(other_ + "/adapter_model.safetensors", dir_ + "/adapter_model.safetensors");
  auto r = load();
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), outside_message(dir_ + "/adapter_model.safetensors"));
}

TEST_F(AdapterDirTest, LinksInsideTheDirectoryAreFollowed) {
  fs::create_directories(dir_ + "/blobs");
  fs::copy_file(other_ + "/adapter_config.json", dir_ + "/blobs/config");
  fs::copy_file(other_ + "/adapter_model.safetensors", dir_ + "/blobs/weights");
  fs::create_symlink("blobs/config", dir_ + "/adapter_config.json");
  fs::create_symlink(dir_ + "/blobs/weights", dir_ + "/adapter_model.safetensors");
  auto r = load();
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
}

TEST_F(AdapterDirTest, ADirectorySwappedForALinkSinceRegistrationIsRefused) {
  fs::copy(other_, dir_, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  const std::string confined = adapter_confinement_for(dir_);
  ASSERT_TRUE(load(confined).is_ok());
  fs::remove_all(dir_);
  fs::create_directory_symlink(other_, dir_);  // a complete adapter, but elsewhere
  auto r = load(confined);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), outside_message(dir_));
}

TEST_F(AdapterDirTest, NonRegularFilesAreRefused) {
  fs::create_directories(dir_ + "/adapter_config.json");
  auto r = load();
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("not a regular file"), std::string::npos) << r.status().to_string();
}

TEST(AdapterConfinement, IsTheRealPathOrTheNormalFormWhileMissing) {
  const std::string tmp = fs::canonical(testing::make_temp_dir("lg-confine")).string();
  fs::create_directory_symlink(tmp, tmp + "/link");
  EXPECT_EQ(adapter_confinement_for(tmp + "/link/"), tmp);
  EXPECT_EQ(adapter_confinement_for(tmp + "/gone/../missing"), tmp + "/missing");
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace loragate
