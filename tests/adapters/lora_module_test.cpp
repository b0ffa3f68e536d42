// LoraModule: names, sub-blocks, paths and shapes for a base model.
#include "adapters/lora_module.h"

#include <gtest/gtest.h>

#include "tests/adapters/adapter_fixtures.h"

namespace loragate {
namespace {

TEST(LoraModuleTest, NamesRoundTrip) {
  const char* names[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  ASSERT_EQ(kAllLoraModules.size(), 7u);
  for (int i = 0; i < kLoraModuleCount; ++i) {
    const LoraModule m = kAllLoraModules[i];
    EXPECT_EQ(lora_module_index(m), i);
    EXPECT_EQ(lora_module_name(m), names[i]);
    EXPECT_EQ(lora_module_from_name(names[i]), m);
  }
  EXPECT_EQ(lora_module_from_name("lm_head"), std::nullopt);
  EXPECT_EQ(lora_module_from_name("embed_tokens"), std::nullopt);
  EXPECT_EQ(lora_module_from_name("Q_PROJ"), std::nullopt);
  EXPECT_EQ(lora_module_from_name(""), std::nullopt);
}

TEST(LoraModuleTest, BlocksAndPaths) {
  EXPECT_EQ(lora_module_block(LoraModule::kQ), "self_attn");
  EXPECT_EQ(lora_module_block(LoraModule::kO), "self_attn");
  EXPECT_EQ(lora_module_block(LoraModule::kGate), "mlp");
  EXPECT_EQ(lora_module_block(LoraModule::kDown), "mlp");
  EXPECT_EQ(lora_module_path(3, LoraModule::kQ), "model.layers.3.self_attn.q_proj");
  EXPECT_EQ(lora_module_path(12, LoraModule::kUp), "model.layers.12.mlp.up_proj");
  EXPECT_EQ(lora_module_names_list(), "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj");
}

TEST(LoraModuleTest, FeaturesFollowTheBaseShape) {
  // GQA with head_dim != hidden / heads, to tell the formulas apart.
  ModelConfig c = testing::tiny_base();
  c.hidden_size = 48;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.intermediate_size = 100;
  EXPECT_EQ(in_features(LoraModule::kQ, c), 48);
  EXPECT_EQ(out_features(LoraModule::kQ, c), 64);
  EXPECT_EQ(in_features(LoraModule::kK, c), 48);
  EXPECT_EQ(out_features(LoraModule::kK, c), 32);
  EXPECT_EQ(in_features(LoraModule::kV, c), 48);
  EXPECT_EQ(out_features(LoraModule::kV, c), 32);
  EXPECT_EQ(in_features(LoraModule::kO, c), 64);
  EXPECT_EQ(out_features(LoraModule::kO, c), 48);
  EXPECT_EQ(in_features(LoraModule::kGate, c), 48);
  EXPECT_EQ(out_features(LoraModule::kGate, c), 100);
  EXPECT_EQ(in_features(LoraModule::kUp, c), 48);
  EXPECT_EQ(out_features(LoraModule::kUp, c), 100);
  EXPECT_EQ(in_features(LoraModule::kDown, c), 100);
  EXPECT_EQ(out_features(LoraModule::kDown, c), 48);
}

TEST(LoraModuleTest, Stories260KShapes) {
  ModelConfig c = testing::tiny_base();
  c.hidden_size = 64;
  c.intermediate_size = 172;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 4;
  c.head_dim = 8;
  EXPECT_EQ(out_features(LoraModule::kQ, c), 64);
  EXPECT_EQ(out_features(LoraModule::kK, c), 32);
  EXPECT_EQ(in_features(LoraModule::kDown, c), 172);
}

}  // namespace
}  // namespace loragate
