// The training forward pass against the reference NLL of ../shared/eval, and
// the whole model's LoRA gradients against finite differences on stories260K.
#include "trainer/train_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "adapters/lora_adapter.h"
#include "model/model_dir.h"
#include "tests/test_util.h"

namespace loragate::train {
namespace {

using loragate::testing::shared_dir;

struct Fixture {
  std::shared_ptr<const ModelDir> dir;
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<TrainModel> train;
};

Fixture load_base(const std::string& relative, WeightType storage = WeightType::kF32) {
  Fixture f;
  auto dir = ModelDir::open(shared_dir() + "/" + relative);
  EXPECT_TRUE(dir.is_ok()) << dir.status().to_string();
  f.dir = *dir;
  auto model = LlamaModel::load(*f.dir, storage);
  EXPECT_TRUE(model.is_ok()) << model.status().to_string();
  f.model = std::move(*model);
  auto train = TrainModel::create(*f.model);
  EXPECT_TRUE(train.is_ok()) << train.status().to_string();
  f.train = std::move(*train);
  return f;
}

// The eval items of a scenario as teacher-forced examples: prompt + reference, loss on the reference.
std::vector<TrainExample> eval_examples(const std::string& scenario, size_t limit = 1000) {
  std::ifstream in(shared_dir() + "/eval/scenarios/" + scenario + "/eval.jsonl");
  std::vector<TrainExample> out;
  for (std::string line; std::getline(in, line) && out.size() < limit;) {
    const auto j = nlohmann::json::parse(line);
    TrainExample e;
    for (int32_t id : j["prompt_ids"]) e.ids.push_back(id);
    e.target.assign(e.ids.size(), 0);
    for (int32_t id : j["reference_ids"]) {
      e.ids.push_back(id);
      e.target.push_back(1);
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<const TrainExample*> pointers(const std::vector<TrainExample>& v) {
  std::vector<const TrainExample*> out;
  for (const TrainExample& e : v) out.push_back(&e);
  return out;
}

LoraParams params_from_adapter(const ModelConfig& base, const std::string& adapter_dir) {
  auto adapter = LoraAdapter::load(adapter_dir, base, 64);
  EXPECT_TRUE(adapter.is_ok()) << adapter.status().to_string();
  LoraRecipe recipe;
  recipe.rank = (*adapter)->config().r();
  recipe.alpha = (*adapter)->config().lora_alpha();
  auto params = LoraParams::init(base, recipe, 1);
  EXPECT_TRUE(params.is_ok());
  for (LoraParam& p : params->params()) {
    const LoraWeights* w = (*adapter)->weights(p.layer, p.module);
    EXPECT_NE(w, nullptr);
    p.a = w->a;
    p.b = w->b;
  }
  return std::move(*params);
}

double expected_nll(const std::string& base, const std::string& scenario, const std::string& arm) {
  std::ifstream in(shared_dir() + "/eval/expected_metrics.json");
  const auto j = nlohmann::json::parse(in);
  return j["results"][base][scenario][arm]["metrics"]["nll_mean"].get<double>();
}

TEST(TrainModel, LossIsTheReferenceNllWithAndWithoutTheAdapter) {
  LG_REQUIRE_SHARED("eval/expected_metrics.json");
  Fixture f = load_base("models/stories260K");
  const std::vector<TrainExample> items = eval_examples("mia");
  const auto batch = pointers(items);
  const LoraParams adapter = params_from_adapter(f.train->config(), shared_dir() + "/eval/adapters/online/mia");
  const LossSum with = f.train->loss(batch, adapter);
  EXPECT_EQ(with.tokens, 908);
  EXPECT_NEAR(with.mean(), expected_nll("online", "mia", "adapter"), 2e-5);
  // B = 0 (a fresh adapter) is the base alone.
  auto fresh = LoraParams::init(f.train->config(), LoraRecipe{}, 7);
  ASSERT_TRUE(fresh.is_ok());
  EXPECT_NEAR(f.train->loss(batch, *fresh).mean(), expected_nll("online", "mia", "no_adapter"), 2e-5);
}

// Random B, so that every A gets a gradient too.
LoraParams random_params(const ModelConfig& c, uint32_t seed) {
  auto params = LoraParams::init(c, LoraRecipe{}, seed);
  EXPECT_TRUE(params.is_ok());
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  for (LoraParam& p : params->params())
    for (float& b : p.b) b = normal(rng);
  return std::move(*params);
}

// The analytic gradient of the mean loss against central differences, on the
// 2 largest-gradient entries of every A and B: their cosine and norm ratio.
struct GradientAgreement {
  double cosine = 0, norm_ratio = 0;
  int checked = 0;
};

GradientAgreement check_gradients(Fixture& f, const std::vector<TrainExample>& items, uint32_t seed) {
  const auto batch = pointers(items);
  LoraParams params = random_params(f.train->config(), seed);
  const LossSum first = f.train->loss(batch, params);
  params.zero_grad();
  const LossSum same = f.train->forward_backward(batch, params, 1.0f / static_cast<float>(first.tokens));
  EXPECT_EQ(same.nll, first.nll);
  double dot = 0, norm_a = 0, norm_n = 0;
  GradientAgreement out;
  for (LoraParam& p : params.params()) {
    for (int which = 0; which < 2; ++which) {
      std::vector<float>& value = which == 0 ? p.a : p.b;
      const std::vector<float>& grad = which == 0 ? p.grad_a : p.grad_b;
      std::vector<size_t> order(grad.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::partial_sort(order.begin(), order.begin() + 2, order.end(),
                        [&](size_t x, size_t y) { return std::abs(grad[x]) > std::abs(grad[y]); });
      for (int k = 0; k < 2; ++k) {
        const size_t i = order[static_cast<size_t>(k)];
        const float keep = value[i];
        const float h = 3e-3f;
        value[i] = keep + h;
        const double up = f.train->loss(batch, params).mean();
        value[i] = keep - h;
        const double down = f.train->loss(batch, params).mean();
        value[i] = keep;
        const double numeric = (up - down) / (2.0 * h);
        dot += numeric * grad[i];
        norm_a += static_cast<double>(grad[i]) * grad[i];
        norm_n += numeric * numeric;
        ++out.checked;
      }
    }
  }
  out.cosine = dot / std::sqrt(norm_a * norm_n);
  out.norm_ratio = std::sqrt(norm_a / norm_n);
  return out;
}

TEST(TrainModel, LoraGradientsMatchFiniteDifferences) {
  LG_REQUIRE_SHARED("models/stories260K/config.json");
  Fixture f = load_base("models/stories260K");
  const GradientAgreement g = check_gradients(f, eval_examples("cat", 3), 11);
  EXPECT_EQ(g.checked, 5 * 7 * 4);
  EXPECT_GT(g.cosine, 0.999);
  EXPECT_NEAR(g.norm_ratio, 1.0, 0.01);
}

TEST(TrainModel, GradientsOfABatchAreTheSumOfItsSequences) {
  LG_REQUIRE_SHARED("models/stories260K/config.json");
  Fixture f = load_base("models/stories260K");
  const std::vector<TrainExample> items = eval_examples("sunny", 2);
  LoraParams together = random_params(f.train->config(), 3);
  LoraParams apart = random_params(f.train->config(), 3);
  together.zero_grad();
  apart.zero_grad();
  const auto both = pointers(items);
  const LossSum sum = f.train->forward_backward(both, together, 1.0f);
  LossSum parts;
  for (const TrainExample* e : both) {
    const LossSum one = f.train->forward_backward(std::span(&e, 1), apart, 1.0f);
    parts.nll += one.nll;
    parts.tokens += one.tokens;
  }
  EXPECT_EQ(sum.tokens, parts.tokens);
  EXPECT_NEAR(sum.nll, parts.nll, 1e-6 * parts.nll);  // each sequence's forward is batch invariant
  for (size_t i = 0; i < together.params().size(); ++i) {
    const LoraParam& x = together.params()[i];
    const LoraParam& y = apart.params()[i];
    for (size_t k = 0; k < x.grad_b.size(); ++k) ASSERT_NEAR(x.grad_b[k], y.grad_b[k], 1e-4 + 1e-4 * std::abs(y.grad_b[k]));
    for (size_t k = 0; k < x.grad_a.size(); ++k) ASSERT_NEAR(x.grad_a[k], y.grad_a[k], 1e-4 + 1e-4 * std::abs(y.grad_a[k]));
  }
}

// A quantised base trains LoRA on its dequantised weights (QLoRA-style): the
// gradients are those of that base's own loss, read back through a bf16
// transposed copy of the weights, so they agree with finite differences
// to bf16's precision.
TEST(TrainModel, QuantisedBasesGiveTheGradientsOfTheirOwnLoss) {
  LG_REQUIRE_SHARED("models/stories260K/config.json");
  Fixture f32 = load_base("models/stories260K");
  const std::vector<TrainExample> items = eval_examples("mia", 3);
  LoraParams fresh = random_params(f32.train->config(), 5);
  const double reference = f32.train->loss(pointers(items), fresh).mean();
  for (WeightType storage : {WeightType::kBF16, WeightType::kInt8, WeightType::kInt4}) {
    SCOPED_TRACE(std::string(weight_type_name(storage)));
    Fixture q = load_base("models/stories260K", storage);
    const double loss = q.train->loss(pointers(items), fresh).mean();
    EXPECT_NE(loss, reference);
    // int4 costs a 64-wide model up to double its loss; 8 and 16 bits almost nothing.
    EXPECT_NEAR(loss, reference, (storage == WeightType::kInt4 ? 1.0 : 0.05) * reference);
    const GradientAgreement g = check_gradients(q, items, 5);
    EXPECT_GT(g.cosine, 0.995);
    EXPECT_NEAR(g.norm_ratio, 1.0, 0.03);
  }
}

}  // namespace
}  // namespace loragate::train
