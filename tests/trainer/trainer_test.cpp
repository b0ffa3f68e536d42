// train_adapter() end to end on stories260K: the loss falls to near zero on a
// tiny set, the PEFT folder loads, and an interrupted run resumed gives the
// very adapter an uninterrupted run gives.
#include "trainer/trainer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <fstream>
#include <nlohmann/json.hpp>

#include "adapters/lora_adapter.h"
#include "engine/compute_gate.h"
#include "model/model_dir.h"
#include "tests/test_util.h"

namespace loragate::train {
namespace {

using loragate::testing::make_temp_dir;
using loragate::testing::shared_dir;
namespace fs = std::filesystem;

class TrainerRun : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(shared_dir() + "/eval/scenarios/mia/train.jsonl")) return;
    dir_ = make_temp_dir("trainer_run");
    // The first 4 lines of the mia scenario: small enough to learn by heart.
    std::ifstream in(shared_dir() + "/eval/scenarios/mia/train.jsonl");
    std::ofstream out(dir_ + "/tiny.jsonl");
    std::string line;
    for (int i = 0; i < 4 && std::getline(in, line); ++i) out << line << "\n";
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  TrainJob job(const std::string& out) const {
    TrainJob j;
    j.base_dir = shared_dir() + "/models/stories260K";
    j.data_path = dir_ + "/tiny.jsonl";
    j.out_dir = dir_ + "/" + out;
    j.config.batch = 4;
    j.config.steps = 60;
    j.config.optimizer.lr = 1e-2;
    j.config.checkpoint_every = 0;
    return j;
  }

  std::string dir_;
};

TEST_F(TrainerRun, LearnsATinySetByHeartAndWritesAPeftFolder) {
  LG_REQUIRE_SHARED("eval/scenarios/mia/train.jsonl");
  int calls = 0;
  auto report = train_adapter(job("tiny"), [&](const TrainProgress& p) {
    ++calls;
    EXPECT_EQ(p.step, calls);
    EXPECT_EQ(p.total_steps, 60);
    EXPECT_GT(p.tokens_per_s, 0);
  });
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_EQ(calls, 60);
  EXPECT_GT(report->first_loss, 0.3);
  EXPECT_LT(report->last_loss, 0.05);

  auto base = ModelDir::open(shared_dir() + "/models/stories260K");
  ASSERT_TRUE(base.is_ok());
  auto adapter = LoraAdapter::load(dir_ + "/tiny", (*base)->config(), 64);
  ASSERT_TRUE(adapter.is_ok()) << adapter.status().to_string();
  EXPECT_EQ((*adapter)->num_targets(), 5 * 7);
  EXPECT_FLOAT_EQ((*adapter)->weights(0, LoraModule::kQ)->scaling, 2.0f);

  std::ifstream in(dir_ + "/tiny/training.json");
  const auto record = nlohmann::json::parse(in);
  EXPECT_EQ(record["base"]["sha256"], (*base)->sha256());
  EXPECT_EQ(record["data"]["sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(record["loss_curve"].size(), 60u);
  EXPECT_EQ(record["config"]["lora"]["rank"], 8);
  EXPECT_FALSE(fs::exists(dir_ + "/tiny/checkpoint"));
}

TEST_F(TrainerRun, AnInterruptedRunResumesToTheSameAdapter) {
  LG_REQUIRE_SHARED("eval/scenarios/mia/train.jsonl");
  TrainJob whole = job("whole");
  whole.config.steps = 12;
  ASSERT_TRUE(train_adapter(whole).is_ok());

  TrainJob cut = job("cut");
  cut.config.steps = 12;
  std::atomic<bool> cancel{false};
  auto first = train_adapter(cut, [&](const TrainProgress& p) { cancel = p.step == 5; }, &cancel);
  ASSERT_FALSE(first.is_ok());
  EXPECT_EQ(first.status().code(), StatusCode::kCancelled);
  EXPECT_TRUE(fs::exists(dir_ + "/cut/checkpoint"));
  // Not resuming over a checkpoint is refused rather than silently restarting.
  EXPECT_EQ(train_adapter(cut).status().code(), StatusCode::kFailedPrecondition);

  // A resume with another recipe is refused: it would not be the run it claims to continue.
  TrainJob other = cut;
  other.resume = true;
  other.config.optimizer.lr = 5e-3;
  EXPECT_EQ(train_adapter(other).status().code(), StatusCode::kFailedPrecondition);

  cut.resume = true;
  auto rest = train_adapter(cut);
  ASSERT_TRUE(rest.is_ok()) << rest.status().to_string();
  EXPECT_EQ(rest->steps, 12);
  auto bytes = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  EXPECT_EQ(bytes(dir_ + "/cut/adapter_model.safetensors"), bytes(dir_ + "/whole/adapter_model.safetensors"));
}


// In a server, training computes on the pool live traffic uses: every
// sequence takes a background turn of the gate, and none runs while a
// serving step holds it.
TEST_F(TrainerRun, InsideAServerEachSequenceTakesABackgroundTurn) {
  LG_REQUIRE_SHARED("eval/scenarios/mia/train.jsonl");
  ComputeGate gate;
  TrainJob gated = job("gated");
  gated.config.steps = 3;
  gated.gate = &gate;
  std::atomic<int> steps{0};
  Result<TrainReport> report = Status::internal("not run");
  {
    ComputeGate::Turn live(gate, GateClass::kServing);  // a serving step in progress
    std::thread training([&] { report = train_adapter(gated, [&](const TrainProgress&) { ++steps; }); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(steps.load(), 0) << "training ran while a serving step held the gate";
    live.reset();
    training.join();
  }
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_EQ(gate.stats().background_turns, 3 * 4);  // steps x sequences per micro-batch

  // The same run on the trainer's own pool: the same losses up to summation order.
  TrainJob alone = job("alone");
  alone.config.steps = 3;
  auto reference = train_adapter(alone);
  ASSERT_TRUE(reference.is_ok());
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(report->curve[i].loss, reference->curve[i].loss, 1e-4);
}

}  // namespace
}  // namespace loragate::train
