// Engine limits fixed at load: max_model_len against the KV pool, and the
// option defaults shared with the adapter cache.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace loragate {
namespace {

// stories260K: max_position_embeddings 512.
Result<std::unique_ptr<Engine>> load_with_pool(int32_t num_blocks, int64_t max_model_len = 0) {
  EngineOptions o;
  o.kv_block_size = 16;
  o.kv_num_blocks = num_blocks;
  o.max_model_len = max_model_len;
  return Engine::load(testing::shared_dir() + "/models/stories260K", o);
}

TEST(EngineLimitsTest, DefaultMaxModelLenIsCappedAtWhatTheKvPoolHolds) {
  LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
  auto e = load_with_pool(8);  // 128 tokens of cache, below the model's 512 positions
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_EQ((*e)->max_model_len(), 128);
  // What chat does without max_tokens (all the room the length leaves) is accepted, not refused as too large.
  GenerationRequest r;
  r.prompt_ids = {1, 100, 200};
  r.params.max_tokens = static_cast<int32_t>((*e)->max_model_len() - 3);
  EXPECT_TRUE((*e)->validate_request(r).is_ok()) << (*e)->validate_request(r).to_string();
}

TEST(EngineLimitsTest, AConfiguredMaxModelLenTheKvPoolCannotHoldIsRefusedAtLoad) {
  LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
  auto e = load_with_pool(8, 256);
  ASSERT_FALSE(e.is_ok()) << "a 256-token length over a 128-token pool must not start";
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("KV pool"), std::string::npos) << e.status().to_string();
  EXPECT_NE(e.status().message().find("128"), std::string::npos) << e.status().to_string();

  auto fits = load_with_pool(8, 100);
  ASSERT_TRUE(fits.is_ok()) << fits.status().to_string();
  EXPECT_EQ((*fits)->max_model_len(), 100);
}

TEST(EngineLimitsTest, AMaxModelLenPastThePositionsIsCappedThere) {
  LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
  auto e = load_with_pool(64, 4096);  // 1024 tokens of pool, 512 positions
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_EQ((*e)->max_model_len(), 512);
}

TEST(EngineLimitsTest, AdapterOptionDefaultsAgreeWithTheAdapterCache) {
  const EngineOptions engine;
  const AdapterCacheOptions cache;
  EXPECT_EQ(engine.max_loras, cache.max_loras);
  EXPECT_EQ(engine.max_lora_rank, cache.max_rank);
  EXPECT_EQ(engine.adapter_host_bytes, cache.host_budget_bytes);
}

}  // namespace
}  // namespace loragate
