// Training checkpoints: an exact round trip of params, moments, step and
// curve; refusal of another run's checkpoint and of damaged files.
#include "trainer/train_checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/random.h"
#include "tests/test_util.h"
#include "tests/trainer/trainer_fixtures.h"

namespace loragate::train {
namespace {

namespace fs = std::filesystem;

class TrainCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::make_temp_dir("lg-train-ckpt");
    out_ = root_ + "/run";
    config_.lora.rank = 4;
    config_.lora.alpha = 8;
    config_.lora.targets = {LoraModule::kQ, LoraModule::kV, LoraModule::kDown};
    config_.lora.layers = {0, 2};
    config_.optimizer.lr = 0.01;
    config_.optimizer.weight_decay = 0.01;
    identity_ = {to_json(config_), std::string(64, 'd'), std::string(64, 'b')};
  }
  void TearDown() override { fs::remove_all(root_); }

  LoraParams fresh(uint64_t seed) const {
    auto p = LoraParams::init(base_, config_.lora, seed);
    EXPECT_TRUE(p.is_ok()) << p.status().to_string();
    return std::move(*p);
  }

  // Seeded gradients, then a step: moments and params all become non-trivial.
  static void train_steps(LoraParams& p, AdamW& opt, int steps, uint64_t seed) {
    Xoshiro256 rng(seed);
    for (int s = 0; s < steps; ++s) {
      p.zero_grad();
      for (LoraParam& q : p.params()) {
        for (float& g : q.grad_a) g = static_cast<float>(rng.uniform() - 0.5);
        for (float& g : q.grad_b) g = static_cast<float>(rng.uniform() - 0.5);
      }
      opt.step(p);
    }
  }

  static CheckpointState state_of(int64_t steps) {
    CheckpointState st;
    st.step = steps;
    st.sampler_position = 3 * steps;
    for (int64_t s = 1; s <= steps; ++s) st.curve.push_back({s, 2.5 / static_cast<double>(s) + 0.1, 0.75 * static_cast<double>(s), 1e-3 / 3, 100 + s});
    return st;
  }

  static void expect_same_params(const LoraParams& x, const LoraParams& y) {
    ASSERT_EQ(x.params().size(), y.params().size());
    for (size_t i = 0; i < x.params().size(); ++i) {
      EXPECT_EQ(x.params()[i].a, y.params()[i].a) << i;
      EXPECT_EQ(x.params()[i].b, y.params()[i].b) << i;
    }
  }

  std::string checkpoint_file(const char* name) const { return out_ + "/checkpoint/" + name; }

  std::string root_, out_;
  ModelConfig base_ = testing::small_train_base();
  TrainConfig config_;
  RunIdentity identity_;
};

TEST_F(TrainCheckpointTest, RoundTripsExactly) {
  LoraParams p = fresh(1);
  AdamW opt(config_.optimizer, 20);
  train_steps(p, opt, 3, 11);
  CheckpointState st = state_of(3);
  st.curve[1].loss = std::nan("");  // a non-finite point survives as NaN
  ASSERT_TRUE(save_checkpoint(out_, p, opt, st, identity_).is_ok());

  LoraParams q = fresh(2);  // other values until loaded
  AdamW opt2(config_.optimizer, 20);
  auto loaded = load_checkpoint(out_, q, opt2, identity_);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  expect_same_params(p, q);
  EXPECT_EQ(opt2.moments(), opt.moments());
  EXPECT_EQ(opt2.steps_taken(), 3);
  EXPECT_EQ(loaded->step, 3);
  EXPECT_EQ(loaded->sampler_position, 9);
  ASSERT_EQ(loaded->curve.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const LossPoint &a = st.curve[i], &b = loaded->curve[i];
    EXPECT_EQ(a.step, b.step);
    if (i == 1) {
      EXPECT_TRUE(std::isnan(b.loss));
    } else {
      EXPECT_EQ(a.loss, b.loss);  // doubles round-trip exactly
    }
    EXPECT_EQ(a.grad_norm, b.grad_norm);
    EXPECT_EQ(a.lr, b.lr);
    EXPECT_EQ(a.tokens, b.tokens);
  }

  // Resumed and uninterrupted runs take the same next step.
  train_steps(p, opt, 2, 12);
  train_steps(q, opt2, 2, 12);
  expect_same_params(p, q);
  EXPECT_EQ(opt.moments(), opt2.moments());
}

TEST_F(TrainCheckpointTest, BeforeTheFirstStep) {
  LoraParams p = fresh(1);
  AdamW opt(config_.optimizer, 20);
  ASSERT_TRUE(save_checkpoint(out_, p, opt, CheckpointState{}, identity_).is_ok());
  LoraParams q = fresh(2);
  AdamW opt2(config_.optimizer, 20);
  auto loaded = load_checkpoint(out_, q, opt2, identity_);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  expect_same_params(p, q);
  EXPECT_EQ(loaded->step, 0);
  EXPECT_TRUE(loaded->curve.empty());
  train_steps(p, opt, 1, 5);
  train_steps(q, opt2, 1, 5);
  expect_same_params(p, q);
}

TEST_F(TrainCheckpointTest, ReplacesTheOldOneAndLeavesNoTemporaries) {
  LoraParams p = fresh(1);
  AdamW opt(config_.optimizer, 20);
  train_steps(p, opt, 1, 1);
  ASSERT_TRUE(save_checkpoint(out_, p, opt, state_of(1), identity_).is_ok());
  train_steps(p, opt, 2, 2);
  ASSERT_TRUE(save_checkpoint(out_, p, opt, state_of(3), identity_).is_ok());
  // A crashed save's temporary folder is cleared by the next save.
  fs::create_directories(out_ + "/checkpoint.tmp-abcdef");
  ASSERT_TRUE(save_checkpoint(out_, p, opt, state_of(3), identity_).is_ok());
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(out_)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"checkpoint"});

  LoraParams q = fresh(1);
  AdamW opt2(config_.optimizer, 20);
  auto loaded = load_checkpoint(out_, q, opt2, identity_);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_EQ(loaded->step, 3);
  EXPECT_EQ(opt2.steps_taken(), 3);
  expect_same_params(p, q);
}

TEST_F(TrainCheckpointTest, RecoversAPreviousCheckpointMovedAside) {
  LoraParams p = fresh(1);
  AdamW opt(config_.optimizer, 20);
  train_steps(p, opt, 2, 1);
  ASSERT_TRUE(save_checkpoint(out_, p, opt, state_of(2), identity_).is_ok());
  // What a save interrupted between its two renames leaves.
  fs::rename(out_ + "/checkpoint", out_ + "/checkpoint.old");
  LoraParams q = fresh(2);
  AdamW opt2(config_.optimizer, 20);
  auto loaded = load_checkpoint(out_, q, opt2, identity_);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_EQ(loaded->step, 2);
  expect_same_params(p, q);
}

TEST_F(TrainCheckpointTest, RemoveTakesEverything) {
  LoraParams p = fresh(1);
  AdamW opt(config_.optimizer, 20);
  ASSERT_TRUE(save_checkpoint(out_, p, opt, state_of(0), identity_).is_ok());
  fs::create_directories(out_ + "/checkpoint.tmp-123456");
  fs::create_directories(out_ + "/checkpoint.old");
  std::ofstream(out_ + "/adapter_config.json") << "{}";  // the run's output stays
  ASSERT_TRUE(remove_checkpoint(out_).is_ok());
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(out_)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"adapter_config.json"});
  auto r = load_checkpoint(out_, p, opt, identity_);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(remove_checkpoint(out_).is_ok());             // nothing left: fine
  EXPECT_TRUE(remove_checkpoint(root_ + "/never").is_ok());  // no folder: fine
}

TEST_F(TrainCheckpointTest, NotFoundWhenAbsent) {
  LoraParams p = fresh(1);
  AdamW opt(config_.optimizer, 20);
  auto r = load_checkpoint(out_, p, opt, identity_);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().to_string();
}

TEST_F(TrainCheckpointTest, RefusesAnotherRun) {
  LoraParams p = fresh(1);
  AdamW opt(config_.optimizer, 20);
  train_steps(p, opt, 1, 1);
  ASSERT_TRUE(save_checkpoint(out_, p, opt, state_of(1), identity_).is_ok());

  struct Case {
    const char* what;
    RunIdentity identity;
    std::vector<std::string> says;
  };
  TrainConfig other = config_;
  other.optimizer.lr = 0.02;
  other.seed = 1;
  RunIdentity config_differs = identity_;
  config_differs.config = to_json(other);
  RunIdentity data_differs = identity_;
  data_differs.data_sha256 = std::string(64, 'e');
  RunIdentity base_differs = identity_;
  base_differs.base_sha256 = std::string(64, 'c');
  RunIdentity all_differ = config_differs;
  all_differ.data_sha256 = data_differs.data_sha256;
  all_differ.base_sha256 = base_differs.base_sha256;
  const std::vector<Case> cases = {
      {"config", config_differs, {"training config", "optimizer.lr", "seed"}},
      {"data", data_differs, {"training data", "dddddddddddd", "eeeeeeeeeeee"}},
      {"base", base_differs, {"base model", "bbbbbbbbbbbb", "cccccccccccc"}},
      {"all", all_differ, {"training config", "training data", "base model"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    LoraParams q = fresh(2);
    const LoraParams untouched = fresh(2);
    AdamW opt2(config_.optimizer, 20);
    auto r = load_checkpoint(out_, q, opt2, c.identity);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
    for (const std::string& s : c.says) EXPECT_NE(r.status().message().find(s), std::string::npos) << r.status().message();
    expect_same_params(q, untouched);
    EXPECT_EQ(opt2.steps_taken(), 0);
    EXPECT_TRUE(opt2.moments().empty());
  }
}

TEST_F(TrainCheckpointTest, RefusesParamsOfAnotherShape) {
  LoraParams p = fresh(1);
  AdamW opt(config_.optimizer, 20);
  ASSERT_TRUE(save_checkpoint(out_, p, opt, state_of(0), identity_).is_ok());
  LoraRecipe wider = config_.lora;
  wider.rank = 8;
  auto q = LoraParams::init(base_, wider, 1);
  ASSERT_TRUE(q.is_ok());
  AdamW opt2(config_.optimizer, 20);
  auto r = load_checkpoint(out_, *q, opt2, identity_);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().to_string();
}

TEST_F(TrainCheckpointTest, RefusesDamagedFiles) {
  LoraParams p = fresh(1);
  AdamW opt(config_.optimizer, 20);
  train_steps(p, opt, 2, 1);
  const std::string state = checkpoint_file("state.safetensors");
  const std::string meta = checkpoint_file("checkpoint.json");

  auto expect_corrupt = [&](const char* what, const char* says) {
    SCOPED_TRACE(what);
    LoraParams q = fresh(2);
    const LoraParams untouched = fresh(2);
    AdamW opt2(config_.optimizer, 20);
    auto r = load_checkpoint(out_, q, opt2, identity_);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << r.status().to_string();
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
    expect_same_params(q, untouched);
  };

  ASSERT_TRUE(save_checkpoint(out_, p, opt, state_of(2), identity_).is_ok());
  fs::resize_file(state, fs::file_size(state) - 16);
  expect_corrupt("truncated state", "state.safetensors");

  ASSERT_TRUE(save_checkpoint(out_, p, opt, state_of(2), identity_).is_ok());
  testing::flip_last_bit(state);
  expect_corrupt("altered state", "state.safetensors");

  ASSERT_TRUE(save_checkpoint(out_, p, opt, state_of(2), identity_).is_ok());
  fs::resize_file(meta, fs::file_size(meta) / 2);
  expect_corrupt("truncated json", "checkpoint.json");

  ASSERT_TRUE(save_checkpoint(out_, p, opt, state_of(2), identity_).is_ok());
  fs::remove(state);
  expect_corrupt("missing state", "state.safetensors");

  ASSERT_TRUE(save_checkpoint(out_, p, opt, state_of(2), identity_).is_ok());
  {
    std::ifstream in(meta);
    nlohmann::json j = nlohmann::json::parse(in);
    j["curve"][1]["tokens"] = "many";
    std::ofstream(meta, std::ios::trunc) << j.dump();
  }
  expect_corrupt("bad curve", "tokens");

  ASSERT_TRUE(save_checkpoint(out_, p, opt, state_of(2), identity_).is_ok());
  {
    std::ofstream f(meta, std::ios::trunc);
    f << R"({"format": "loragate-train-checkpoint", "version": 1, "identity": {}, "state_sha256": "x"})";
  }
  auto r = load_checkpoint(out_, p, opt, identity_);
  ASSERT_FALSE(r.is_ok());  // an identity that names nothing is another run's
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().to_string();
}

}  // namespace
}  // namespace loragate::train
