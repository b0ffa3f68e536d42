// CudaModelRunner against CpuModelRunner with bf16 weights: the same steps
// (prefill chunks, decode tokens, adapters, a sliding window) must give the
// same logits up to the GPU's rounding of activations to bf16, and the same
// greedy tokens through an Engine. Tests that need a GPU skip without one;
// the load-time refusals run everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "adapters/synth_adapter.h"
#include "engine/cpu_model_runner.h"
#include "engine/cuda/cuda_model_runner.h"
#include "engine/engine.h"
#include "model/model_dir.h"
#include "model/synth_model.h"
#include "kernels/cuda/cuda_device.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

#define LG_REQUIRE_DEVICE()                                                          \
  do {                                                                               \
    if (cuda::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine"; \
  } while (0)

// Logits agree when every difference is within this fraction of the step's
// largest CPU logit: the GPU rounds each projection's input to bf16 (a
// relative 2^-9 per element) where the CPU keeps f32, which moves logits by
// well under 1% of their range; a wrong layer, mask or adapter moves them by
// tens of percent.
constexpr float kRelTolerance = 2e-2f;

const Device kCuda0{Device::Kind::kCuda, 0};

RunnerOptions runner_options(Device device, int32_t block_size = 4, int32_t num_blocks = 64) {
  RunnerOptions o;
  o.device = device;
  o.weight_dtype = WeightType::kBF16;
  o.kv_block_size = block_size;
  o.kv_num_blocks = num_blocks;
  return o;
}

std::string tiny_model(const std::string& root, int64_t sliding_window = 0) {
  const std::string dir = root + "/tiny";
  EXPECT_TRUE(write_synth_model(dir, SynthOptions{"tiny", 11, DType::kF32}).is_ok());
  if (sliding_window > 0) {  // as tests/engine/sliding_window_test.cpp makes a Mistral
    auto config = ModelConfig::load(dir);
    EXPECT_TRUE(config.is_ok()) << config.status().to_string();
    config->architecture = "MistralForCausalLM";
    config->model_type = "mistral";
    config->sliding_window = sliding_window;
    std::ofstream(dir + "/config.json") << config->to_json();
  }
  return dir;
}

// Compares one step's logits (rows of `vocab`), naming the step.
void expect_close(const std::vector<float>& cpu, const std::vector<float>& gpu, int64_t vocab, const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  float max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_TRUE(std::isfinite(gpu[i])) << what << ": logit " << i << " is " << gpu[i];
    max_abs = std::max(max_abs, std::fabs(cpu[i]));
    max_diff = std::max(max_diff, std::fabs(cpu[i] - gpu[i]));
  }
  const float tolerance = kRelTolerance * std::max(max_abs, 1e-3f);
  EXPECT_LE(max_diff, tolerance) << what << ": largest |cpu - gpu| " << max_diff << ", largest |cpu| " << max_abs;
  // The top token must agree wherever the CPU's top two are further apart than the tolerance allows to flip.
  for (size_t r = 0; r < cpu.size() / static_cast<size_t>(vocab); ++r) {
    const auto row = [&](const std::vector<float>& v) { return v.begin() + static_cast<ptrdiff_t>(r * vocab); };
    const auto top_cpu = std::max_element(row(cpu), row(cpu) + vocab) - row(cpu);
    const auto top_gpu = std::max_element(row(gpu), row(gpu) + vocab) - row(gpu);
    std::vector<float> sorted(row(cpu), row(cpu) + vocab);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    if (sorted[0] - sorted[1] > 2 * tolerance) {
      EXPECT_EQ(top_cpu, top_gpu) << what << ", row " << r;
    }
  }
}

// --- Load-time refusals: no device needed --------------------------------

class CudaRunnerLoadTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = tiny_model(root_ = testing::make_temp_dir("lg-cuda-load")); }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_, dir_;
};

TEST_F(CudaRunnerLoadTest, ADeviceThisMachineLacksIsUnavailableNamingTheCount) {
  const int count = cuda::cuda_device_count();
  // cuda:<count> is one past the last device: on this machine (none) that is cuda:0.
  auto runner = load_model_runner(*ModelDir::open(dir_).value(), runner_options(Device{Device::Kind::kCuda, count}));
  ASSERT_FALSE(runner.is_ok());
  EXPECT_EQ(runner.status().code(), StatusCode::kUnavailable) << runner.status().to_string();
  const std::string& message = runner.status().message();
  EXPECT_NE(message.find("cuda:" + std::to_string(count)), std::string::npos) << message;
  EXPECT_NE(message.find("has " + std::to_string(count) + " CUDA device"), std::string::npos) << message;
}

// These are checked before the runner touches CUDA, so they run without a device.
TEST_F(CudaRunnerLoadTest, RefusesWeightsOtherThanBf16ByName) {
  for (WeightType t : {WeightType::kF32, WeightType::kInt8, WeightType::kInt4}) {
    RunnerOptions o = runner_options(kCuda0);
    o.weight_dtype = t;
    auto runner = CudaModelRunner::load(*ModelDir::open(dir_).value(), o);
    ASSERT_FALSE(runner.is_ok());
    EXPECT_EQ(runner.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(runner.status().message().find(std::string(weight_type_name(t))), std::string::npos);
    EXPECT_NE(runner.status().message().find("the CUDA runner holds bf16 weights (dtype bf16)"),
              std::string::npos)
        << runner.status().to_string();
  }
}

TEST_F(CudaRunnerLoadTest, RefusesToMergeAnAdapter) {
  auto config = ModelConfig::load(dir_);
  ASSERT_TRUE(config.is_ok());
  ASSERT_TRUE(write_synth_adapter(root_ + "/adapter", *config, {}).is_ok());
  auto adapter = LoraAdapter::load(root_ + "/adapter", *config, 64);
  ASSERT_TRUE(adapter.is_ok()) << adapter.status().to_string();
  RunnerOptions o = runner_options(kCuda0);
  o.merge = adapter->get();
  auto runner = CudaModelRunner::load(*ModelDir::open(dir_).value(), o);
  ASSERT_FALSE(runner.is_ok());
  EXPECT_EQ(runner.status().code(), StatusCode::kUnsupported) << runner.status().to_string();
}

// --- The synthetic model: CUDA vs CPU over mixed steps -------------------

// A sequence of the scripted steps: its tokens, its blocks and its adapter slot.
struct Script {
  std::vector<int32_t> tokens;
  std::vector<int32_t> blocks;
  int32_t slot = -1;
};

// Appends tokens [begin, begin + n) of `s` to `batch`, with logits for the last `logits` of them.
void add_chunk(ForwardBatch& batch, const Script& s, int64_t begin, int64_t n, int64_t logits) {
  ForwardSeq seq;
  seq.token_begin = batch.num_tokens();
  seq.num_tokens = n;
  seq.start_pos = begin;
  seq.block_table = s.blocks.data();
  seq.logits_begin = n - logits;
  seq.num_logits = logits;
  seq.lora_slot = s.slot;
  for (int64_t i = 0; i < n; ++i) {
    batch.tokens.push_back(s.tokens[static_cast<size_t>(begin + i)]);
    batch.positions.push_back(static_cast<int32_t>(begin + i));
  }
  batch.seqs.push_back(seq);
}

// Three sequences through prefill chunks of different sizes, then decode
// steps, mixed in every step; block size 4, so chunks straddle blocks.
std::vector<ForwardBatch> scripted_steps(std::vector<Script>& seqs) {
  for (size_t i = 0; i < seqs.size(); ++i) {
    for (int t = 0; t < 20; ++t) seqs[i].tokens.push_back(3 + static_cast<int32_t>((i * 131 + t * 37) % 500));
    for (int b = 0; b < 8; ++b) seqs[i].blocks.push_back(static_cast<int32_t>(i * 8 + (7 - b)));  // not in order
  }
  std::vector<ForwardBatch> steps(5);
  add_chunk(steps[0], seqs[0], 0, 5, 5);  // every prompt row (prompt logprobs)
  add_chunk(steps[0], seqs[1], 0, 9, 1);
  add_chunk(steps[0], seqs[2], 0, 3, 0);  // a chunk with no logits
  add_chunk(steps[1], seqs[0], 5, 7, 2);
  add_chunk(steps[1], seqs[1], 9, 1, 1);  // decode beside two prefill chunks
  add_chunk(steps[1], seqs[2], 3, 3, 1);
  for (int64_t d = 0; d < 3; ++d) {
    add_chunk(steps[2 + d], seqs[0], 12 + d, 1, 1);
    add_chunk(steps[2 + d], seqs[1], 10 + d, 1, 1);
    add_chunk(steps[2 + d], seqs[2], 6 + d, 1, 1);
  }
  return steps;
}

// Runs the script on both runners (adapters in `adapter_dirs` go in slots 0, 1, ...).
void compare_runners(const std::string& dir, std::vector<int32_t> slots, const std::vector<std::string>& adapter_dirs) {
  auto cpu = load_model_runner(*ModelDir::open(dir).value(), runner_options(Device{}));
  auto gpu = load_model_runner(*ModelDir::open(dir).value(), runner_options(kCuda0));
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().to_string();
  ASSERT_TRUE(gpu.is_ok()) << gpu.status().to_string();
  const ModelConfig& c = (*cpu)->config();
  std::unique_ptr<LoraSlotStore> cpu_slots, gpu_slots;
  if (!adapter_dirs.empty()) {
    cpu_slots = (*cpu)->make_lora_slots(static_cast<int32_t>(adapter_dirs.size()), 16);
    gpu_slots = (*gpu)->make_lora_slots(static_cast<int32_t>(adapter_dirs.size()), 16);
    for (size_t i = 0; i < adapter_dirs.size(); ++i) {
      auto adapter = LoraAdapter::load(adapter_dirs[i], c, 16);
      ASSERT_TRUE(adapter.is_ok()) << adapter.status().to_string();
      cpu_slots->set(static_cast<int32_t>(i), **adapter);
      gpu_slots->set(static_cast<int32_t>(i), **adapter);
    }
  }
  std::vector<Script> seqs(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) seqs[i].slot = slots[i];
  const std::vector<ForwardBatch> steps = scripted_steps(seqs);
  for (size_t s = 0; s < steps.size(); ++s) {
    const size_t n = static_cast<size_t>(steps[s].num_logit_rows() * c.vocab_size);
    std::vector<float> want(n), got(n, NAN);
    ASSERT_TRUE((*cpu)->forward(steps[s], cpu_slots.get(), want.data()).is_ok());
    const Status st = (*gpu)->forward(steps[s], gpu_slots.get(), got.data());
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    expect_close(want, got, c.vocab_size, "step " + std::to_string(s));
  }
}

class CudaRunnerSynthTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = testing::make_temp_dir("lg-cuda-synth"); }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_;
};

TEST_F(CudaRunnerSynthTest, MixedPrefillAndDecodeStepsMatchTheCpuRunner) {
  LG_REQUIRE_DEVICE();
  compare_runners(tiny_model(root_), {-1, -1, -1}, {});
}

TEST_F(CudaRunnerSynthTest, ASlidingWindowMatchesTheCpuRunner) {
  LG_REQUIRE_DEVICE();
  compare_runners(tiny_model(root_, /*sliding_window=*/4), {-1, -1, -1}, {});
}

TEST_F(CudaRunnerSynthTest, MixedAdaptersMatchTheCpuRunner) {
  LG_REQUIRE_DEVICE();
  const std::string dir = tiny_model(root_);
  auto config = ModelConfig::load(dir);
  ASSERT_TRUE(config.is_ok());
  std::vector<std::string> adapters;
  for (int64_t rank : {8, 3}) {
    SynthAdapterOptions o;
    o.rank = rank;
    o.seed = static_cast<uint64_t>(rank);
    o.b_std = 0.2;  // strong enough to move logits well past the tolerance
    adapters.push_back(root_ + "/adapter" + std::to_string(rank));
    ASSERT_TRUE(write_synth_adapter(adapters.back(), *config, o).is_ok());
  }
  compare_runners(dir, {0, -1, 1}, adapters);
}

TEST_F(CudaRunnerSynthTest, RefusesAdapterSlotsItDidNotMake) {
  LG_REQUIRE_DEVICE();
  const std::string dir = tiny_model(root_);
  auto cpu = load_model_runner(*ModelDir::open(dir).value(), runner_options(Device{}));
  auto gpu = load_model_runner(*ModelDir::open(dir).value(), runner_options(kCuda0));
  ASSERT_TRUE(cpu.is_ok() && gpu.is_ok());
  std::unique_ptr<LoraSlotStore> host_slots = (*cpu)->make_lora_slots(1, 4);
  ForwardBatch batch;
  Script s;
  s.tokens = {5, 6};
  s.blocks = {0};
  add_chunk(batch, s, 0, 2, 1);
  std::vector<float> logits(static_cast<size_t>((*gpu)->config().vocab_size));
  const Status st = (*gpu)->forward(batch, host_slots.get(), logits.data());
  EXPECT_EQ(st.code(), StatusCode::kInternal) << st.to_string();
  // And a token outside the vocabulary is refused before anything reaches the device.
  batch.tokens[1] = static_cast<int32_t>((*gpu)->config().vocab_size);
  EXPECT_EQ((*gpu)->forward(batch, nullptr, logits.data()).code(), StatusCode::kInvalidArgument);
}

// --- stories260K: the golden prompts --------------------------------------

std::string stories_dir() { return testing::shared_dir() + "/models/stories260K"; }

std::vector<std::vector<int32_t>> golden_prompts() {
  std::ifstream in(testing::shared_dir() + "/models/golden.json");
  const nlohmann::json g = nlohmann::json::parse(in);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& c : g.at("cases")) prompts.push_back(c.at("prompt_ids").get<std::vector<int32_t>>());
  return prompts;
}

GenerationRequest greedy(const std::vector<int32_t>& prompt, const std::string& adapter = "") {
  GenerationRequest r;
  r.prompt_ids = prompt;
  r.adapter = adapter;
  r.params.temperature = 0.0f;
  r.params.max_tokens = 48;
  return r;
}

// An engine over stories260K on `device` with bf16 weights, adapters a, b and c loaded when asked.
std::unique_ptr<Engine> make_engine(Device device, int64_t max_batched_tokens, bool with_adapters) {
  EngineOptions o;
  o.device = device;
  o.weight_dtype = WeightType::kBF16;
  o.max_num_batched_tokens = max_batched_tokens;
  auto engine = Engine::load(stories_dir(), o);
  EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
  if (!engine.is_ok()) return nullptr;
  if (with_adapters) {
    for (const char* name : {"a", "b", "c"}) {
      EXPECT_TRUE((*engine)->adapters()->add(name, testing::shared_dir() + "/models/stories260K-lora/" + name).is_ok());
      EXPECT_TRUE((*engine)->adapters()->load_now(name).is_ok());
    }
  }
  return std::move(engine).value();
}

// The output tokens of `requests`, run together.
std::vector<std::vector<int32_t>> generate(Engine* engine, std::vector<GenerationRequest> requests) {
  std::vector<std::vector<int32_t>> out;
  if (engine == nullptr) return out;
  auto results = engine->generate(std::move(requests));
  EXPECT_TRUE(results.is_ok()) << results.status().to_string();
  if (!results.is_ok()) return out;
  for (const GenerationResult& r : *results) {
    EXPECT_TRUE(r.error.empty()) << r.error;
    out.push_back(r.output_ids);
  }
  return out;
}

// Where two token lists first part, for a readable failure.
std::string first_difference(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return "first difference at output token " + std::to_string(i) + " of " + std::to_string(a.size());
}

TEST(CudaRunnerStoriesTest, FirstStepLogitsOfTheGoldenPromptsMatchTheCpuRunner) {
  LG_REQUIRE_DEVICE();
  LG_REQUIRE_SHARED("models/golden.json");
  LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
  auto cpu = load_model_runner(*ModelDir::open(stories_dir()).value(), runner_options(Device{}, 16, 16));
  auto gpu = load_model_runner(*ModelDir::open(stories_dir()).value(), runner_options(kCuda0, 16, 16));
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().to_string();
  ASSERT_TRUE(gpu.is_ok()) << gpu.status().to_string();
  const int64_t vocab = (*cpu)->config().vocab_size;
  std::vector<int32_t> table(16);
  for (int32_t b = 0; b < 16; ++b) table[static_cast<size_t>(b)] = b;
  for (const std::vector<int32_t>& prompt : golden_prompts()) {
    Script s;
    s.tokens = prompt;
    s.blocks = table;
    ForwardBatch batch;
    add_chunk(batch, s, 0, static_cast<int64_t>(prompt.size()), 1);
    std::vector<float> want(static_cast<size_t>(vocab)), got(static_cast<size_t>(vocab), NAN);
    ASSERT_TRUE((*cpu)->forward(batch, nullptr, want.data()).is_ok());
    const Status st = (*gpu)->forward(batch, nullptr, got.data());
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    expect_close(want, got, vocab, "prompt of " + std::to_string(prompt.size()) + " tokens");
  }
}

TEST(CudaRunnerStoriesTest, GreedyGenerationReproducesTheCpuBf16Engine) {
  LG_REQUIRE_DEVICE();
  LG_REQUIRE_SHARED("models/golden.json");
  LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
  std::vector<GenerationRequest> requests;
  for (const auto& p : golden_prompts()) requests.push_back(greedy(p));
  // Chunks of 16 tokens: the long prompt's prefill shares steps with the others' decode.
  const auto want = generate(make_engine(Device{}, 16, false).get(), requests);
  const auto got = generate(make_engine(kCuda0, 16, false).get(), requests);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "prompt " << i << ": " << first_difference(want[i], got[i]);
}

TEST(CudaRunnerStoriesTest, MixedAdapterBatchesEqualOneAtATimeOnTheGpu) {
  LG_REQUIRE_DEVICE();
  LG_REQUIRE_SHARED("models/golden.json");
  LG_REQUIRE_SHARED("models/stories260K-lora/a");
  std::vector<GenerationRequest> requests;
  for (const auto& p : golden_prompts()) {
    for (const char* adapter : {"", "a", "b", "c"}) requests.push_back(greedy(p, adapter));
  }
  const std::unique_ptr<Engine> engine = make_engine(kCuda0, 4096, true);
  const auto batched = generate(engine.get(), requests);
  ASSERT_EQ(batched.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto alone = generate(engine.get(), {requests[i]});
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_EQ(batched[i], alone[0]) << "request " << i << " adapter '" << requests[i].adapter << "': "
                                    << first_difference(alone[0], batched[i]);
  }
  // The adapters must matter, or this proves nothing.
  EXPECT_NE(batched[0], batched[1]);
}

}  // namespace
}  // namespace loragate
