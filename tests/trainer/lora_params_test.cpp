// LoraParams: PEFT's default initialisation, lookup, and PEFT output that the
// project's own adapter loader reads back exactly.
#include "trainer/lora_params.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "adapters/lora_adapter.h"
#include "common/random.h"
#include "tests/test_util.h"
#include "tests/trainer/trainer_fixtures.h"

namespace loragate::train {
namespace {

namespace fs = std::filesystem;

LoraRecipe recipe(int64_t rank, double alpha, std::vector<LoraModule> targets = {kAllLoraModules.begin(), kAllLoraModules.end()},
                  std::vector<int64_t> layers = {}) {
  LoraRecipe r;
  r.rank = rank;
  r.alpha = alpha;
  r.targets = std::move(targets);
  r.layers = std::move(layers);
  return r;
}

TEST(LoraParamsInit, ShapesAndOrderFollowLayersThenModules) {
  const ModelConfig base = testing::small_train_base();
  // Targets given out of order: the params still come in kAllLoraModules order.
  auto p = LoraParams::init(base, recipe(4, 8, {LoraModule::kDown, LoraModule::kK, LoraModule::kQ}, {2, 0}), 1);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  const std::vector<std::pair<int64_t, LoraModule>> want = {
      {0, LoraModule::kQ}, {0, LoraModule::kK}, {0, LoraModule::kDown},
      {2, LoraModule::kQ}, {2, LoraModule::kK}, {2, LoraModule::kDown}};
  ASSERT_EQ(p->params().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const LoraParam& q = p->params()[i];
    EXPECT_EQ(q.layer, want[i].first) << i;
    EXPECT_EQ(q.module, want[i].second) << i;
    EXPECT_EQ(q.rank, 4);
    EXPECT_EQ(q.in, in_features(q.module, base));
    EXPECT_EQ(q.out, out_features(q.module, base));
    EXPECT_EQ(q.a.size(), static_cast<size_t>(4 * q.in));
    EXPECT_EQ(q.b.size(), static_cast<size_t>(q.out * 4));
    EXPECT_EQ(q.grad_a.size(), q.a.size());
    EXPECT_EQ(q.grad_b.size(), q.b.size());
  }
  // k: 32 -> 16, down: 48 -> 32.
  EXPECT_EQ(p->params()[1].in, 32);
  EXPECT_EQ(p->params()[1].out, 16);
  EXPECT_EQ(p->params()[2].in, 48);
  EXPECT_EQ(p->params()[2].out, 32);
}

TEST(LoraParamsInit, AIsKaimingUniformAndBIsZero) {
  const ModelConfig base = testing::small_train_base();
  auto p = LoraParams::init(base, recipe(8, 16), 7000);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  // A / bound should be U(-1, 1): mean 0, variance 1/3, reaching both ends.
  double sum = 0, sum_sq = 0, lo = 0, hi = 0;
  size_t n = 0;
  for (const LoraParam& q : p->params()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(q.in));  // 1/sqrt(32) or 1/sqrt(48)
    for (float x : q.a) {
      ASSERT_LE(std::abs(x), bound) << lora_module_path(q.layer, q.module);
      const double u = x / bound;
      sum += u;
      sum_sq += u * u;
      lo = std::min(lo, u);
      hi = std::max(hi, u);
      ++n;
    }
    for (float x : q.b) ASSERT_EQ(x, 0.0f);
    for (float g : q.grad_a) ASSERT_EQ(g, 0.0f);
    for (float g : q.grad_b) ASSERT_EQ(g, 0.0f);
  }
  ASSERT_EQ(n, size_t{3} * 8 * (32 * 6 + 48));  // 3 layers, rank 8, six modules of in 32 and down of 48
  const double mean = sum / static_cast<double>(n);
  const double var = sum_sq / static_cast<double>(n) - mean * mean;
  // n = 5760: the mean's standard error is ~0.008, the variance's ~0.004.
  EXPECT_NEAR(mean, 0.0, 0.04);
  EXPECT_NEAR(var, 1.0 / 3.0, 0.02);
  EXPECT_LT(lo, -0.98);
  EXPECT_GT(hi, 0.98);
  // Every matrix gets its own draws.
  EXPECT_NE(p->params()[0].a, p->params()[7].a);  // layer 0 q vs layer 1 q
  EXPECT_NE(p->params()[0].a[0], p->params()[1].a[0]);
}

TEST(LoraParamsInit, DeterministicFromTheSeed) {
  const ModelConfig base = testing::small_train_base();
  auto a = LoraParams::init(base, recipe(4, 8), 42);
  auto b = LoraParams::init(base, recipe(4, 8), 42);
  auto c = LoraParams::init(base, recipe(4, 8), 43);
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
  for (size_t i = 0; i < a->params().size(); ++i) {
    EXPECT_EQ(a->params()[i].a, b->params()[i].a) << i;
    EXPECT_NE(a->params()[i].a, c->params()[i].a) << i;
  }
  // A (layer, module) draws the same A whatever else the recipe targets.
  auto only = LoraParams::init(base, recipe(4, 8, {LoraModule::kUp}, {1}), 42);
  ASSERT_TRUE(only.is_ok());
  ASSERT_EQ(only->params().size(), 1u);
  EXPECT_EQ(only->params()[0].a, a->find(1, LoraModule::kUp)->a);
}

TEST(LoraParamsInit, RefusesBadRecipes) {
  const ModelConfig base = testing::small_train_base();
  auto rank0 = LoraParams::init(base, recipe(0, 8), 1);
  ASSERT_FALSE(rank0.is_ok());
  EXPECT_NE(rank0.status().message().find("rank"), std::string::npos) << rank0.status().message();
  auto layer3 = LoraParams::init(base, recipe(4, 8, {LoraModule::kQ}, {0, 3}), 1);
  ASSERT_FALSE(layer3.is_ok());
  EXPECT_EQ(layer3.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(layer3.status().message().find("layer 3"), std::string::npos) << layer3.status().message();
  EXPECT_FALSE(LoraParams::init(base, recipe(4, 8, {LoraModule::kQ}, {-1}), 1).is_ok());
  EXPECT_FALSE(LoraParams::init(base, recipe(4, 8, {}), 1).is_ok());
  auto twice = LoraParams::init(base, recipe(4, 8, {LoraModule::kQ, LoraModule::kQ}), 1);
  ASSERT_FALSE(twice.is_ok());
  EXPECT_NE(twice.status().message().find("q_proj"), std::string::npos) << twice.status().message();
}

TEST(LoraParams, FindAndCountWithSubsets) {
  const ModelConfig base = testing::small_train_base();
  // Layer 2 twice: the same as once.
  auto p = LoraParams::init(base, recipe(4, 8, {LoraModule::kQ, LoraModule::kDown}, {2, 0, 2}), 1);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  // Per layer: q 4*(32+32) + down 4*(48+32) = 256 + 320, on layers 0 and 2.
  EXPECT_EQ(p->num_parameters(), 2 * (256 + 320));
  ASSERT_NE(p->find(0, LoraModule::kQ), nullptr);
  EXPECT_EQ(p->find(0, LoraModule::kQ)->layer, 0);
  EXPECT_EQ(p->find(2, LoraModule::kDown)->module, LoraModule::kDown);
  EXPECT_EQ(p->find(2, LoraModule::kDown)->layer, 2);
  EXPECT_EQ(p->find(1, LoraModule::kQ), nullptr);     // layer not targeted
  EXPECT_EQ(p->find(0, LoraModule::kV), nullptr);     // module not targeted
  EXPECT_EQ(p->find(3, LoraModule::kQ), nullptr);     // past the base
  EXPECT_EQ(p->find(-1, LoraModule::kQ), nullptr);
  const LoraParams& cp = *p;
  EXPECT_EQ(cp.find(2, LoraModule::kQ), &p->params()[2]);

  auto all = LoraParams::init(base, recipe(2, 4), 1);
  ASSERT_TRUE(all.is_ok());
  // Per layer: rank 2 * (q 64 + k 48 + v 48 + o 64 + gate 80 + up 80 + down 80).
  EXPECT_EQ(all->num_parameters(), 3 * 2 * (64 + 48 + 48 + 64 + 80 + 80 + 80));
}

TEST(LoraParams, ScalingAndZeroGrad) {
  const ModelConfig base = testing::small_train_base();
  auto p = LoraParams::init(base, recipe(4, 16, {LoraModule::kV}), 1);
  ASSERT_TRUE(p.is_ok());
  EXPECT_FLOAT_EQ(p->scaling(), 4.0f);
  LoraRecipe rs = recipe(4, 16, {LoraModule::kV});
  rs.use_rslora = true;
  auto q = LoraParams::init(base, rs, 1);
  ASSERT_TRUE(q.is_ok());
  EXPECT_FLOAT_EQ(q->scaling(), 8.0f);  // 16 / sqrt(4)

  for (LoraParam& x : p->params()) {
    for (float& g : x.grad_a) g = 1.5f;
    for (float& g : x.grad_b) g = -2.0f;
  }
  p->zero_grad();
  for (const LoraParam& x : p->params()) {
    for (float g : x.grad_a) ASSERT_EQ(g, 0.0f);
    for (float g : x.grad_b) ASSERT_EQ(g, 0.0f);
  }
}

// --- PEFT output ---------------------------------------------------------------

class LoraParamsPeftTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = testing::make_temp_dir("lg-lora-params"); }
  void TearDown() override { fs::remove_all(root_); }

  // B gets seeded values too, so that a round trip of zeros proves nothing less.
  static void fill_b(LoraParams& p, uint64_t seed) {
    Xoshiro256 rng(seed);
    for (LoraParam& q : p.params()) {
      for (float& x : q.b) x = static_cast<float>(rng.uniform() - 0.5);
    }
  }

  static nlohmann::json read_json(const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
  }

  // Saves `p`, loads it with LoraAdapter::load for `base` and checks every
  // matrix and the scaling.
  void round_trip(const ModelConfig& base, const LoraParams& p, const std::string& name) {
    const std::string dir = root_ + "/" + name;
    ASSERT_TRUE(p.save_peft(dir, "some/base").is_ok());
    auto loaded = LoraAdapter::load(dir, base, 64);
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
    const LoraAdapter& a = **loaded;
    EXPECT_EQ(a.num_targets(), static_cast<int64_t>(p.params().size()));
    EXPECT_EQ(a.config().r(), p.recipe().rank);
    EXPECT_EQ(a.config().lora_alpha(), p.recipe().alpha);
    EXPECT_EQ(a.config().use_rslora(), p.recipe().use_rslora);
    EXPECT_EQ(a.config().base_model_name_or_path(), "some/base");
    for (int64_t layer = 0; layer < base.num_hidden_layers; ++layer) {
      for (LoraModule m : kAllLoraModules) {
        SCOPED_TRACE(lora_module_path(layer, m));
        const LoraParam* q = p.find(layer, m);
        const LoraWeights* w = a.weights(layer, m);
        ASSERT_EQ(q == nullptr, w == nullptr);
        if (!q) continue;
        EXPECT_EQ(w->rank, q->rank);
        EXPECT_EQ(w->scaling, p.scaling());
        EXPECT_EQ(w->a, q->a);  // bit-exact
        EXPECT_EQ(w->b, q->b);
      }
    }
    // Only the two files: no temporary left behind.
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"adapter_config.json", "adapter_model.safetensors"}));
  }

  std::string root_;
};

TEST_F(LoraParamsPeftTest, RoundTripsThroughTheAdapterLoader) {
  const ModelConfig base = testing::small_train_base();
  auto p = LoraParams::init(base, recipe(4, 8), 3);
  ASSERT_TRUE(p.is_ok());
  fill_b(*p, 3);
  round_trip(base, *p, "all");

  const nlohmann::json config = read_json(root_ + "/all/adapter_config.json");
  EXPECT_EQ(config.at("peft_type"), "LORA");
  EXPECT_EQ(config.at("task_type"), "CAUSAL_LM");
  EXPECT_EQ(config.at("bias"), "none");
  EXPECT_EQ(config.at("r"), 4);
  EXPECT_EQ(config.at("lora_alpha"), 8.0);
  EXPECT_EQ(config.at("use_rslora"), false);
  EXPECT_EQ(config.at("target_modules"),
            (nlohmann::json{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}));
  EXPECT_FALSE(config.contains("layers_to_transform"));  // every layer
}

TEST_F(LoraParamsPeftTest, SubsetsAndRsloraRoundTrip) {
  const ModelConfig base = testing::small_train_base();
  LoraRecipe r = recipe(8, 32, {LoraModule::kUp, LoraModule::kO}, {1, 2});
  r.use_rslora = true;
  auto p = LoraParams::init(base, r, 5);
  ASSERT_TRUE(p.is_ok());
  fill_b(*p, 5);
  round_trip(base, *p, "subset");
  auto loaded = LoraAdapter::load(root_ + "/subset", base, 64);
  ASSERT_TRUE(loaded.is_ok());
  EXPECT_FLOAT_EQ((*loaded)->weights(1, LoraModule::kO)->scaling, static_cast<float>(32 / std::sqrt(8.0)));

  const nlohmann::json config = read_json(root_ + "/subset/adapter_config.json");
  EXPECT_EQ(config.at("target_modules"), (nlohmann::json{"o_proj", "up_proj"}));
  EXPECT_EQ(config.at("layers_to_transform"), (nlohmann::json{1, 2}));
  EXPECT_EQ(config.at("use_rslora"), true);

  // Every layer named explicitly is no subset: the key is left out.
  auto every = LoraParams::init(base, recipe(2, 4, {LoraModule::kQ}, {0, 1, 2}), 5);
  ASSERT_TRUE(every.is_ok());
  ASSERT_TRUE(every->save_peft(root_ + "/every", "b").is_ok());
  EXPECT_FALSE(read_json(root_ + "/every/adapter_config.json").contains("layers_to_transform"));
}

TEST_F(LoraParamsPeftTest, OverwritesAnEarlierSave) {
  const ModelConfig base = testing::small_train_base();
  auto p = LoraParams::init(base, recipe(4, 8, {LoraModule::kQ}), 3);
  ASSERT_TRUE(p.is_ok());
  round_trip(base, *p, "again");
  fill_b(*p, 9);
  p->params()[0].a[0] = 0.125f;
  round_trip(base, *p, "again");
}

TEST_F(LoraParamsPeftTest, Stories260KRoundTrip) {
  LG_REQUIRE_SHARED("models/stories260K/config.json");
  auto base = ModelConfig::load(testing::shared_dir() + "/models/stories260K");
  ASSERT_TRUE(base.is_ok()) << base.status().to_string();
  auto p = LoraParams::init(*base, recipe(8, 16), 7000);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  fill_b(*p, 1);
  round_trip(*base, *p, "stories");
  // 5 layers; rank 8 * (q 64+64, k 64+32, v 64+32, o 64+64, gate 64+172, up 64+172, down 172+64).
  EXPECT_EQ(p->num_parameters(), 5 * 8 * (128 + 96 + 96 + 128 + 236 + 236 + 236));
}

}  // namespace
}  // namespace loragate::train
