// AdapterCache: one load per adapter, whoever asks for it.
#include "adapters/adapter_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "model/model_config.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

namespace fs = std::filesystem;

// acquire() until the load it starts has ended (or 20 s passed).
AdapterCache::AcquireResult acquire_after_load(AdapterCache& cache, const std::string& name) {
  AdapterCache::AcquireResult got = cache.acquire(name);
  for (int i = 0; i < 2000 && got.state == AdapterCache::Acquire::kWaitLoad; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    got = cache.acquire(name);
  }
  return got;
}

class AdapterCacheFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("models/stories260K-lora/a/adapter_model.safetensors");
    auto config = ModelConfig::load(testing::shared_dir() + "/models/stories260K");
    ASSERT_TRUE(config.is_ok()) << config.status().to_string();
    base_ = *config;
    tmp_ = testing::make_temp_dir("lg-cache-fail");
    dir_ = tmp_ + "/tenant";
    put_back();
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  void put_back() {
    fs::copy(testing::shared_dir() + "/models/stories260K-lora/a", dir_,
             fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  }
  AdapterCacheOptions options(std::chrono::milliseconds retry) {
    AdapterCacheOptions o{2, 16, 1ll << 30};
    o.retry_after_failure = retry;
    return o;
  }

  ModelConfig base_;
  std::string tmp_, dir_;
};

TEST_F(AdapterCacheFailureTest, AVanishedDirectoryIsRetriedAfterTheBackoffNotCachedForGood) {
  AdapterCache cache(base_, options(std::chrono::milliseconds(200)));
  ASSERT_TRUE(cache.add("tenant", dir_).is_ok());
  fs::rename(dir_, tmp_ + "/away");  // vanished before the first request
  AdapterCache::AcquireResult got = acquire_after_load(cache, "tenant");
  ASSERT_EQ(got.state, AdapterCache::Acquire::kFailed);
  EXPECT_EQ(got.error.code(), StatusCode::kUnavailable);
  EXPECT_NE(got.error.message().find("adapter 'tenant'"), std::string::npos) << got.error.to_string();
  EXPECT_NE(got.error.message().find("retry later"), std::string::npos) << got.error.to_string();
  EXPECT_EQ(got.error.message().find(tmp_), std::string::npos) << "no path for clients: " << got.error.to_string();
  EXPECT_NE(cache.list()[0].error.find(dir_), std::string::npos) << "operators see the path";
  EXPECT_EQ(cache.acquire("tenant").state, AdapterCache::Acquire::kFailed) << "within the backoff: no new load";

  fs::rename(tmp_ + "/away", dir_);  // back
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  got = acquire_after_load(cache, "tenant");
  EXPECT_EQ(got.state, AdapterCache::Acquire::kReady) << got.error.to_string();
  EXPECT_EQ(cache.stats().load_failures, 1);
}

TEST_F(AdapterCacheFailureTest, ABrokenAdapterIsNamedWithoutItsFiles) {
  AdapterCache cache(base_, options(std::chrono::milliseconds(200)));
  std::ofstream(dir_ + "/adapter_model.safetensors", std::ios::trunc) << "not safetensors";
  ASSERT_TRUE(cache.add("tenant", dir_).is_ok());
  AdapterCache::AcquireResult got = acquire_after_load(cache, "tenant");
  ASSERT_EQ(got.state, AdapterCache::Acquire::kFailed);
  EXPECT_EQ(got.error.code(), StatusCode::kUnavailable);
  EXPECT_NE(got.error.message().find("adapter 'tenant' is broken"), std::string::npos) << got.error.to_string();
  EXPECT_EQ(got.error.message().find(tmp_), std::string::npos) << got.error.to_string();
  put_back();  // an operator replaces the files: a request after the backoff loads them
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_EQ(acquire_after_load(cache, "tenant").state, AdapterCache::Acquire::kReady);
}

TEST_F(AdapterCacheFailureTest, ATakenNameIsAlreadyExists) {
  AdapterCache cache(base_, options(std::chrono::milliseconds(0)));
  ASSERT_TRUE(cache.add("tenant", dir_).is_ok());
  EXPECT_EQ(cache.add("tenant", dir_).code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(cache.hold("tenant").is_ok());
  ASSERT_TRUE(cache.remove("tenant").is_ok());
  EXPECT_EQ(cache.add("tenant", dir_).code(), StatusCode::kFailedPrecondition) << "still being removed";
}

TEST_F(AdapterCacheFailureTest, ADirectorySwappedForALinkAfterRegistrationIsRefused) {
  AdapterCache cache(base_, options(std::chrono::milliseconds(0)));
  ASSERT_TRUE(cache.add("tenant", dir_).is_ok());
  fs::rename(dir_, tmp_ + "/elsewhere");
  fs::create_directory_symlink(tmp_ + "/elsewhere", dir_);
  Status s = cache.load_now("tenant");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("resolves outside the adapter directory"), std::string::npos) << s.to_string();
}

TEST_F(AdapterCacheFailureTest, WeightsChangedSinceRegistrationAreRefusedBySha256) {
  AdapterCache probe(base_, options(std::chrono::milliseconds(0)));
  ASSERT_TRUE(probe.add("tenant", dir_).is_ok());
  ASSERT_TRUE(probe.load_now("tenant").is_ok());
  const std::string registered = probe.list()[0].sha256;
  ASSERT_EQ(registered.size(), 64u);

  testing::flip_last_bit(dir_ + "/adapter_model.safetensors");
  AdapterCache cache(base_, options(std::chrono::seconds(10)));  // a restart, with the registry's digest
  ASSERT_TRUE(cache.add("tenant", dir_, registered).is_ok());
  AdapterCache::AcquireResult got = acquire_after_load(cache, "tenant");
  ASSERT_EQ(got.state, AdapterCache::Acquire::kFailed);
  EXPECT_NE(got.error.message().find("adapter 'tenant' is broken"), std::string::npos) << got.error.to_string();
  const std::string why = cache.list()[0].error;
  EXPECT_NE(why.find("changed since it was registered"), std::string::npos) << why;
  EXPECT_NE(why.find(registered), std::string::npos) << why;
  EXPECT_EQ(cache.stats().host_bytes, 0) << "nothing of the changed weights is kept";
}

TEST_F(AdapterCacheFailureTest, TheFirstLoadFixesTheIdentityForLaterReloads) {
  AdapterCacheOptions o = options(std::chrono::milliseconds(0));
  o.host_budget_bytes = 1;  // every load evicts the one before from host memory
  AdapterCache cache(base_, o);
  fs::copy(testing::shared_dir() + "/models/stories260K-lora/b", tmp_ + "/other", fs::copy_options::recursive);
  ASSERT_TRUE(cache.add("tenant", dir_).is_ok());
  ASSERT_TRUE(cache.add("other", tmp_ + "/other").is_ok());
  ASSERT_TRUE(cache.load_now("tenant").is_ok());
  ASSERT_TRUE(cache.load_now("other").is_ok());
  ASSERT_EQ(cache.stats().host_evictions, 1) << "tenant left host memory";

  testing::flip_last_bit(dir_ + "/adapter_model.safetensors");
  const Status reload = cache.load_now("tenant");
  ASSERT_FALSE(reload.is_ok());
  EXPECT_EQ(reload.code(), StatusCode::kCorrupt);
  EXPECT_NE(reload.message().find("changed since it was registered"), std::string::npos) << reload.to_string();
}

TEST(AdapterCacheTest, LoadNowWaitsForAnAsynchronousLoadInsteadOfLoadingTwice) {
  LG_REQUIRE_SHARED("models/stories260K-lora/a/adapter_model.safetensors");
  auto config = ModelConfig::load(testing::shared_dir() + "/models/stories260K");
  ASSERT_TRUE(config.is_ok()) << config.status().to_string();
  for (int round = 0; round < 20; ++round) {
    AdapterCache cache(*config, AdapterCacheOptions{2, 16, 1ll << 30});
    ASSERT_TRUE(cache.add("a", testing::shared_dir() + "/models/stories260K-lora/a").is_ok());
    EXPECT_EQ(cache.acquire("a").state, AdapterCache::Acquire::kWaitLoad);  // the loader thread starts it
    ASSERT_TRUE(cache.load_now("a").is_ok());                               // meanwhile, a registration
    const AdapterCacheStats s = cache.stats();
    EXPECT_EQ(s.loads, 1) << "round " << round << ": loaded twice";
    ASSERT_EQ(cache.list().size(), 1u);
    EXPECT_EQ(s.host_bytes, static_cast<int64_t>(cache.list()[0].bytes)) << "round " << round << ": counted twice";
  }
}

TEST(AdapterCacheTest, LoadNowRetriesAfterAnEarlierFailure) {
  LG_REQUIRE_SHARED("models/stories260K/config.json");
  auto config = ModelConfig::load(testing::shared_dir() + "/models/stories260K");
  ASSERT_TRUE(config.is_ok());
  const std::string dir = testing::make_temp_dir("lg-late-adapter");
  AdapterCache cache(*config, AdapterCacheOptions{2, 16, 1ll << 30});
  ASSERT_TRUE(cache.add("late", dir).is_ok());
  EXPECT_FALSE(cache.load_now("late").is_ok()) << "the directory is empty";
  std::filesystem::copy(testing::shared_dir() + "/models/stories260K-lora/a", dir,
                        std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  EXPECT_TRUE(cache.load_now("late").is_ok()) << "a transient failure is not cached for good";
}

}  // namespace
}  // namespace loragate
