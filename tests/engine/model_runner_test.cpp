// The ModelRunner seam: devices by name, the CPU runner behind an engine,
// and the flat arrays and graph keys a device runner would consume (host
// logic, tested here whatever the machine has).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "adapters/lora_slots.h"
#include "engine/cpu_model_runner.h"
#include "engine/engine.h"
#include "engine/flat_batch.h"
#include "model/model_dir.h"
#include "model/synth_model.h"
#include "tests/test_util.h"

namespace loragate::model_runner_test {

TEST(DeviceTest, ParsesCpuAndCudaDevicesAndRefusesTheRest) {
  EXPECT_EQ(*parse_device("cpu"), Device{});
  EXPECT_EQ(*parse_device("cuda"), (Device{Device::Kind::kCuda, 0}));
  EXPECT_EQ(*parse_device("cuda:3"), (Device{Device::Kind::kCuda, 3}));
  EXPECT_EQ(parse_device("cuda:3")->name(), "cuda:3");
  for (const char* bad : {"gpu", "CPU", "cuda:", "cuda:-1", "cuda:1x", "cuda:99999999999", ""}) {
    Result<Device> d = parse_device(bad);
    ASSERT_FALSE(d.is_ok()) << bad;
    EXPECT_NE(d.status().message().find("cpu, cuda, cuda:N"), std::string::npos) << d.status().to_string();
  }
}

class CpuModelRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("model-runner");
    ASSERT_TRUE(write_synth_model(dir_ + "/tiny", {"tiny", 3, DType::kF32}).is_ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

// Without CUDA compiled in: unsupported; with it but no device: unavailable;
// with a device, this f32 model is refused (the CUDA runner holds bf16).
// Every refusal names the device (tests/cuda/ tests the CUDA runner itself).
TEST_F(CpuModelRunnerTest, ACudaDeviceItCannotRunIsRefusedNamingIt) {
  EngineOptions o;
  o.device = Device{Device::Kind::kCuda, 0};
  auto engine = Engine::load(dir_ + "/tiny", o);
  ASSERT_FALSE(engine.is_ok());
#ifdef LORAGATE_HAVE_CUDA
  EXPECT_TRUE(engine.status().code() == StatusCode::kUnavailable || engine.status().code() == StatusCode::kUnsupported)
      << engine.status().to_string();
#else
  EXPECT_EQ(engine.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(engine.status().message().find("this build has no CUDA"), std::string::npos) << engine.status().to_string();
#endif
  EXPECT_NE(engine.status().message().find("cuda:0"), std::string::npos) << engine.status().to_string();
}

TEST_F(CpuModelRunnerTest, TheEngineRunsOnItAndReportsItsPoolAndWeights) {
  EngineOptions o;
  o.kv_num_blocks = 40;
  o.kv_block_size = 8;
  auto engine = Engine::load(dir_ + "/tiny", o);
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  const ModelRunner& runner = (*engine)->runner();
  EXPECT_EQ(runner.device(), Device{});
  EXPECT_EQ(runner.kv_geometry().num_blocks, 40);
  EXPECT_EQ(runner.kv_geometry().block_size, 8);
  EXPECT_EQ(runner.kv_geometry().bytes(), (*engine)->kv_cache_bytes());
  ASSERT_NE(cpu_model(runner), nullptr);
  EXPECT_EQ(runner.weights_bytes(), cpu_model(runner)->weights().bytes());
  EXPECT_EQ((*engine)->stats().kv_blocks_total, 40);
  // Its adapter slots are the runner's own host LoraSlots.
  ASSERT_NE((*engine)->adapters(), nullptr);
  EXPECT_NE(dynamic_cast<const LoraSlots*>(&(*engine)->adapters()->slots()), nullptr);
}

// A store another runner made (device memory, say) cannot be read on the CPU.
TEST_F(CpuModelRunnerTest, RefusesAdapterSlotsItDidNotMake) {
  class ElsewhereSlots final : public LoraSlotStore {
   public:
    int32_t num_slots() const override { return 1; }
    int32_t max_rank() const override { return 1; }
    void set(int32_t, const LoraAdapter&) override {}
    void reset(int32_t) override {}
    size_t bytes() const override { return 0; }
  };
  auto runner = CpuModelRunner::load(*ModelDir::open(dir_ + "/tiny").value(), RunnerOptions{});
  ASSERT_TRUE(runner.is_ok()) << runner.status().to_string();
  std::vector<int32_t> table = {0};
  ForwardBatch batch;
  batch.tokens = {5};
  batch.positions = {0};
  batch.seqs.push_back({0, 1, 0, table.data(), 0, 1, -1});
  std::vector<float> logits(static_cast<size_t>((*runner)->config().vocab_size));
  const ElsewhereSlots elsewhere;
  EXPECT_EQ((*runner)->forward(batch, &elsewhere, logits.data()).code(), StatusCode::kInternal);
  const std::unique_ptr<LoraSlotStore> own = (*runner)->make_lora_slots(2, 4);
  EXPECT_TRUE((*runner)->forward(batch, own.get(), logits.data()).is_ok());
}

// Three sequences: a prefill chunk of slot 1 that scores two rows, a decode
// of the base, a decode of slot 1 again; blocks of 4 tokens.
ForwardBatch mixed_batch(std::vector<int32_t>& t0, std::vector<int32_t>& t1, std::vector<int32_t>& t2) {
  t0 = {7, 3};        // positions 0..5
  t1 = {2, 9, 4};     // position 9: context 10
  t2 = {11};          // position 2
  ForwardBatch b;
  b.tokens = {10, 11, 12, 13, 14, 15, 20, 30};
  b.positions = {0, 1, 2, 3, 4, 5, 9, 2};
  b.seqs.push_back({0, 6, 0, t0.data(), 4, 2, 1});
  b.seqs.push_back({6, 1, 9, t1.data(), 0, 1, -1});
  b.seqs.push_back({7, 1, 2, t2.data(), 0, 1, 1});
  return b;
}

TEST(FlatBatchTest, FlattensTokensTablesLogitsRowsAndSegments) {
  std::vector<int32_t> t0, t1, t2;
  const FlatBatch f = flatten(mixed_batch(t0, t1, t2), 4);
  EXPECT_EQ(f.token_ids, (std::vector<int32_t>{10, 11, 12, 13, 14, 15, 20, 30}));
  EXPECT_EQ(f.positions, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 9, 2}));
  EXPECT_EQ(f.token_slots, (std::vector<int32_t>{1, 1, 1, 1, 1, 1, -1, 1}));
  EXPECT_EQ(f.query_starts, (std::vector<int32_t>{0, 6, 7, 8}));
  EXPECT_EQ(f.context_lens, (std::vector<int32_t>{6, 10, 3}));
  ASSERT_EQ(f.max_blocks, 3);
  EXPECT_EQ(f.block_tables, (std::vector<int32_t>{7, 3, -1, 2, 9, 4, 11, -1, -1}));
  EXPECT_EQ(f.logits_rows, (std::vector<int32_t>{4, 5, 6, 7}));
  // The base decode splits slot 1's tokens into two segments.
  EXPECT_EQ(f.lora_segments, (std::vector<LoraSegmentSpan>{{1, 0, 6}, {1, 7, 8}}));
}

TEST(FlatBatchTest, DecodeStepsGetTheSmallestBucketThatHoldsThem) {
  std::vector<std::vector<int32_t>> tables;
  auto decode = [&](int n, bool lora) {
    tables.assign(static_cast<size_t>(n), {0});
    ForwardBatch b;
    for (int i = 0; i < n; ++i) {
      b.tokens.push_back(1);
      b.positions.push_back(0);
      b.seqs.push_back({i, 1, 0, tables[static_cast<size_t>(i)].data(), 0, 1, lora && i == 0 ? 0 : -1});
    }
    return decode_graph_key(flatten(b, 16));
  };
  EXPECT_EQ(decode(1, false), (DecodeGraphKey{1, false}));
  EXPECT_EQ(decode(3, true), (DecodeGraphKey{4, true}));
  EXPECT_EQ(decode(9, false), (DecodeGraphKey{16, false}));
  EXPECT_EQ(decode(256, true), (DecodeGraphKey{256, true}));
  EXPECT_EQ(decode(257, false), std::nullopt) << "beyond the largest bucket: eager";
  std::vector<int32_t> t0, t1, t2;
  EXPECT_EQ(decode_graph_key(flatten(mixed_batch(t0, t1, t2), 4)), std::nullopt) << "a prefill chunk: eager";
  EXPECT_EQ(decode_graph_key(FlatBatch{}), std::nullopt);
}

}  // namespace loragate::model_runner_test
