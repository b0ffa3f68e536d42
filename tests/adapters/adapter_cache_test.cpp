// AdapterCache: one load per adapter, whoever asks for it.
#include "adapters/adapter_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include "adapters/lora_slots.h"
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

// A slot store whose set() (the copy into a slot; a device upload on GPU)
// blocks until the test lets it go: the upload "in progress" of the test below.
class BlockingSlots : public LoraSlotStore {
 public:
  BlockingSlots(const ModelConfig& base, int32_t num_slots, int32_t max_rank) : inner_(base, num_slots, max_rank) {}
  int32_t num_slots() const override { return inner_.num_slots(); }
  int32_t max_rank() const override { return inner_.max_rank(); }
  void set(int32_t slot, const LoraAdapter& adapter) override {
    std::unique_lock<std::mutex> lock(mu_);
    uploading_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
    inner_.set(slot, adapter);
  }
  void reset(int32_t slot) override { inner_.reset(slot); }
  size_t bytes() const override { return inner_.bytes(); }

  bool wait_uploading(std::chrono::seconds within) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, within, [&] { return uploading_; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  LoraSlots inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool uploading_ = false;
  bool released_ = false;
};

TEST(AdapterCacheTest, ContainsAndRegistrationDoNotWaitBehindASlotUpload) {
  LG_REQUIRE_SHARED("models/stories260K-lora/a/adapter_model.safetensors");
  auto config = ModelConfig::load(testing::shared_dir() + "/models/stories260K");
  ASSERT_TRUE(config.is_ok()) << config.status().to_string();
  auto store = std::make_unique<BlockingSlots>(*config, 2, 16);
  BlockingSlots* slots = store.get();
  AdapterCache cache(*config, AdapterCacheOptions{2, 16, 1ll << 30}, std::move(store));
  ASSERT_TRUE(cache.add("a", testing::shared_dir() + "/models/stories260K-lora/a").is_ok());
  ASSERT_TRUE(cache.hold("a").is_ok());

  AdapterCache::AcquireResult got;
  std::thread step_thread([&] { got = acquire_after_load(cache, "a"); });
  struct Unblock {  // whatever happens below, the step thread is let go and joined
    BlockingSlots* slots;
    std::thread* thread;
    ~Unblock() {
      slots->release();
      if (thread->joinable()) thread->join();
    }
  } unblock{slots, &step_thread};
  ASSERT_TRUE(slots->wait_uploading(std::chrono::seconds(20))) << "the upload never started";

  // What the gateway does per request and what the admin API does, from another thread, mid-upload.
  auto others = std::async(std::launch::async, [&] {
    const bool found = cache.contains("a");
    const Status added = cache.add("b", testing::shared_dir() + "/models/stories260K-lora/b");
    const bool listed = cache.list().size() == 2;
    (void)cache.stats();
    (void)cache.waiting();
    return found && added.is_ok() && listed;
  });
  const std::future_status during_upload = others.wait_for(std::chrono::seconds(10));
  slots->release();  // before any check: `others` must be able to finish either way
  EXPECT_EQ(during_upload, std::future_status::ready) << "contains()/add() waited behind the slot upload";
  EXPECT_TRUE(others.get());
  step_thread.join();
  EXPECT_EQ(got.state, AdapterCache::Acquire::kReady) << got.error.to_string();
  EXPECT_EQ(cache.running(), std::vector<std::string>{"a"});
  EXPECT_EQ(cache.stats().slots_pinned, 1);
  cache.release(got.slot);
  cache.unhold("a");
}

}  // namespace
}  // namespace loragate
