// TrainConfig <-> JSON: every field round-trips; unknown keys, wrong types
// and out-of-range values are refused naming the key.
#include "trainer/train_config.h"

#include <gtest/gtest.h>

namespace loragate::train {
namespace {

using nlohmann::json;

TrainConfig everything_changed() {
  TrainConfig c;
  c.lora.rank = 16;
  c.lora.alpha = 12.5;
  c.lora.use_rslora = true;
  c.lora.targets = {LoraModule::kDown, LoraModule::kQ};
  c.lora.layers = {3, 1};
  c.optimizer.lr = 3e-4;
  c.optimizer.beta1 = 0.8;
  c.optimizer.beta2 = 0.95;
  c.optimizer.eps = 1e-6;
  c.optimizer.weight_decay = 0.05;
  c.optimizer.warmup_steps = 20;
  c.optimizer.schedule = Schedule::kCosine;
  c.optimizer.max_grad_norm = 1.0;
  c.steps = 321;
  c.epochs = 2.5;
  c.batch = 4;
  c.grad_accum = 8;
  c.seed = 18446744073709551615ull;  // past int64
  c.sampling = Sampling::kShuffle;
  c.max_seq_len = 512;
  c.checkpoint_every = 0;
  return c;
}

void expect_equal(const TrainConfig& a, const TrainConfig& b) {
  EXPECT_EQ(a.lora.rank, b.lora.rank);
  EXPECT_EQ(a.lora.alpha, b.lora.alpha);
  EXPECT_EQ(a.lora.use_rslora, b.lora.use_rslora);
  EXPECT_EQ(a.lora.targets, b.lora.targets);
  EXPECT_EQ(a.lora.layers, b.lora.layers);
  EXPECT_EQ(a.optimizer.lr, b.optimizer.lr);
  EXPECT_EQ(a.optimizer.beta1, b.optimizer.beta1);
  EXPECT_EQ(a.optimizer.beta2, b.optimizer.beta2);
  EXPECT_EQ(a.optimizer.eps, b.optimizer.eps);
  EXPECT_EQ(a.optimizer.weight_decay, b.optimizer.weight_decay);
  EXPECT_EQ(a.optimizer.warmup_steps, b.optimizer.warmup_steps);
  EXPECT_EQ(a.optimizer.schedule, b.optimizer.schedule);
  EXPECT_EQ(a.optimizer.max_grad_norm, b.optimizer.max_grad_norm);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.epochs, b.epochs);
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.grad_accum, b.grad_accum);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.sampling, b.sampling);
  EXPECT_EQ(a.max_seq_len, b.max_seq_len);
  EXPECT_EQ(a.checkpoint_every, b.checkpoint_every);
}

TEST(TrainConfigJson, DefaultsRoundTrip) {
  const TrainConfig c;
  auto back = train_config_from_json(json::parse(to_json(c).dump()));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  expect_equal(c, *back);
  // An empty object is the defaults too.
  auto empty = train_config_from_json(json::object());
  ASSERT_TRUE(empty.is_ok());
  expect_equal(c, *empty);
}

TEST(TrainConfigJson, EveryFieldRoundTripsThroughText) {
  const TrainConfig c = everything_changed();
  const json j = to_json(c);
  auto back = train_config_from_json(json::parse(j.dump()));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  expect_equal(c, *back);
  EXPECT_EQ(to_json(*back), j);
  EXPECT_EQ(j.at("lora").at("targets"), (json{"down_proj", "q_proj"}));
  EXPECT_EQ(j.at("optimizer").at("schedule"), "cosine");
  EXPECT_EQ(j.at("sampling"), "shuffle");
}

TEST(TrainConfigJson, ShortTargetNamesAndSeedsBuiltInCode) {
  auto c = train_config_from_json({{"lora", {{"targets", {"q", "v_proj", "gate"}}}}, {"seed", 5}});
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->lora.targets, (std::vector<LoraModule>{LoraModule::kQ, LoraModule::kV, LoraModule::kGate}));
  EXPECT_EQ(c->seed, 5u);
}

// The refusal of `j`, checking it names `key`.
void expect_refused(const json& j, const std::string& key) {
  auto r = train_config_from_json(j);
  ASSERT_FALSE(r.is_ok()) << j.dump();
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().message();
}

TEST(TrainConfigJson, RefusesUnknownKeys) {
  expect_refused({{"stepz", 3}}, "stepz");
  expect_refused({{"optimizer", {{"learning_rate", 0.1}}}}, "learning_rate");
  expect_refused({{"lora", {{"dropout", 0.1}}}}, "dropout");
  expect_refused(json::array(), "train");
  expect_refused({{"lora", 8}}, "lora");
}

TEST(TrainConfigJson, RefusesBadValuesNamingTheKey) {
  expect_refused({{"lora", {{"rank", 0}}}}, "lora.rank");
  expect_refused({{"lora", {{"rank", 2.5}}}}, "lora.rank");
  expect_refused({{"lora", {{"alpha", -1}}}}, "lora.alpha");
  expect_refused({{"lora", {{"use_rslora", 1}}}}, "lora.use_rslora");
  expect_refused({{"lora", {{"targets", json::array()}}}}, "lora.targets");
  expect_refused({{"lora", {{"targets", {"embed_tokens"}}}}}, "lora.targets");
  expect_refused({{"lora", {{"targets", {"q", "q_proj"}}}}}, "twice");
  expect_refused({{"lora", {{"layers", {0, -1}}}}}, "lora.layers");
  expect_refused({{"optimizer", {{"lr", "fast"}}}}, "optimizer.lr");
  expect_refused({{"optimizer", {{"beta1", 1.0}}}}, "optimizer.beta1");
  expect_refused({{"optimizer", {{"schedule", "linear"}}}}, "optimizer.schedule");
  expect_refused({{"optimizer", {{"warmup_steps", -1}}}}, "optimizer.warmup_steps");
  expect_refused({{"steps", 0}}, "train.steps");
  expect_refused({{"batch", 0}}, "train.batch");
  expect_refused({{"max_seq_len", 1}}, "train.max_seq_len");
  expect_refused({{"sampling", "random"}}, "train.sampling");
  expect_refused({{"seed", -1}}, "train.seed");
  expect_refused({{"seed", 1.5}}, "train.seed");
  expect_refused({{"epochs", std::nan("")}}, "train.epochs");
}

TEST(TrainConfigJson, RangeMessagesShowTheBounds) {
  // Printed with std::to_string these were "[0, 1]" for a bound of 0.999999999 and "[0, 1]" for 1e-30.
  auto beta2 = train_config_from_json({{"optimizer", {{"beta2", 1.0}}}});
  ASSERT_FALSE(beta2.is_ok());
  EXPECT_NE(beta2.status().message().find("0.999999999"), std::string::npos) << beta2.status().message();
  auto eps = train_config_from_json({{"optimizer", {{"eps", 0.0}}}});
  ASSERT_FALSE(eps.is_ok());
  EXPECT_NE(eps.status().message().find("1e-30"), std::string::npos) << eps.status().message();
}

TEST(TrainConfig, TotalSteps) {
  TrainConfig c;
  c.steps = 42;
  EXPECT_EQ(c.total_steps(1000), 42);  // epochs 0: steps as given
  c.epochs = 2;
  c.batch = 16;
  c.grad_accum = 2;
  EXPECT_EQ(c.total_steps(100), 7);  // ceil(200 / 32)
  EXPECT_EQ(c.total_steps(0), 1);
  c.epochs = 1e6;
  c.batch = 1;
  c.grad_accum = 1;
  EXPECT_GT(c.total_steps(int64_t{1} << 60), 0);  // capped, not overflowed
}

TEST(TrainConfig, ParseTarget) {
  EXPECT_EQ(parse_lora_target("q"), LoraModule::kQ);
  EXPECT_EQ(parse_lora_target("q_proj"), LoraModule::kQ);
  EXPECT_EQ(parse_lora_target("down"), LoraModule::kDown);
  EXPECT_EQ(parse_lora_target("gate_proj"), LoraModule::kGate);
  EXPECT_EQ(parse_lora_target("qq"), std::nullopt);
  EXPECT_EQ(parse_lora_target(""), std::nullopt);
  EXPECT_EQ(parse_lora_target("lm_head"), std::nullopt);
}

TEST(LoraRecipe, Scaling) {
  LoraRecipe r;
  r.rank = 16;
  r.alpha = 32;
  EXPECT_FLOAT_EQ(r.scaling(), 2.0f);
  r.use_rslora = true;
  EXPECT_FLOAT_EQ(r.scaling(), 8.0f);
}

}  // namespace
}  // namespace loragate::train
