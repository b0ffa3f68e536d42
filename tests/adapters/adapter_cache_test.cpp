// AdapterCache: one load per adapter, whoever asks for it.
#include "adapters/adapter_cache.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "engine/loader/model_config.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

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
