// Engine limits fixed at load: max_model_len against the KV pool, and the
// option defaults shared with the adapter cache.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace loragate {
namespace {

TEST(EngineLimitsTest, AdapterOptionDefaultsAgreeWithTheAdapterCache) {
  const EngineOptions engine;
  const AdapterCacheOptions cache;
  EXPECT_EQ(engine.max_loras, cache.max_loras);
  EXPECT_EQ(engine.max_lora_rank, cache.max_rank);
  EXPECT_EQ(engine.adapter_host_bytes, cache.host_budget_bytes);
}

}  // namespace
}  // namespace loragate
