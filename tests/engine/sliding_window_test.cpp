// Mistral-style sliding window: attention is limited to the last W positions,
// blocks that fall out of the window return to the pool, and chunked,
// paged generation equals one whole-prompt pass.
#include <gtest/gtest.h>

#include <fstream>

#include "engine/engine.h"
#include "model/synth_model.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

constexpr int kWindow = 8;

std::string make_model(int64_t window) {
  const std::string dir = testing::make_temp_dir("lg-window");
  EXPECT_TRUE(write_synth_model(dir, SynthOptions{"tiny", 7, DType::kF32}).is_ok());
  auto config = ModelConfig::load(dir);
  EXPECT_TRUE(config.is_ok()) << config.status().to_string();
  config->architecture = "MistralForCausalLM";
  config->model_type = "mistral";
  config->sliding_window = window;
  std::ofstream(dir + "/config.json") << config->to_json();
  return dir;
}

GenerationRequest greedy(std::vector<int32_t> prompt, int n) {
  GenerationRequest r;
  r.prompt_ids = std::move(prompt);
  r.params.temperature = 0.0f;
  r.params.max_tokens = n;
  r.params.ignore_eos = true;
  return r;
}

std::vector<int32_t> prompt_of(int n) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(3 + (i * 37) % 500);
  return p;
}

TEST(SlidingWindowTest, ChunkedPagedWithReleaseEqualsWholePrefill) {
  const std::string dir = make_model(kWindow);
  auto reload = ModelConfig::load(dir);
  ASSERT_TRUE(reload.is_ok());
  ASSERT_EQ(reload->sliding_window, kWindow);

  EngineOptions whole;
  whole.max_num_batched_tokens = 1024;
  EngineOptions chunked;
  chunked.max_num_batched_tokens = 5;
  chunked.kv_block_size = 4;
  auto a = Engine::load(dir, whole);
  auto b = Engine::load(dir, chunked);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  auto ra = (*a)->generate({greedy(prompt_of(30), 40)});
  auto rb = (*b)->generate({greedy(prompt_of(30), 40), greedy(prompt_of(11), 25)});
  ASSERT_TRUE(ra.is_ok() && rb.is_ok());
  EXPECT_EQ(ra->front().output_ids, rb->front().output_ids);
}

TEST(SlidingWindowTest, BlocksOutsideTheWindowAreFreed) {
  const std::string dir = make_model(kWindow);
  EngineOptions o;
  o.kv_block_size = 4;
  o.kv_num_blocks = 6;  // 24 tokens of cache for a 60-token sequence: only possible with release
  o.max_num_batched_tokens = 4;
  auto e = Engine::load(dir, o);
  ASSERT_TRUE(e.is_ok());
  ASSERT_TRUE((*e)->add_request(greedy(prompt_of(20), 40)).is_ok());
  int32_t peak = 0;
  while ((*e)->has_unfinished()) {
    ASSERT_TRUE((*e)->step().is_ok());
    peak = std::max(peak, (*e)->stats().kv_blocks_used);
  }
  // Window 8 over blocks of 4: at most 3 blocks live (plus one being filled).
  EXPECT_LE(peak, 4);
  EXPECT_EQ((*e)->stats().kv_blocks_used, 0);
}

TEST(SlidingWindowTest, WindowChangesOutputsOnlyPastTheWindow) {
  const std::string windowed = make_model(kWindow);
  const std::string full = make_model(0);
  auto w = Engine::load(windowed, {});
  auto f = Engine::load(full, {});
  ASSERT_TRUE(w.is_ok() && f.is_ok());
  // A prompt shorter than the window sees the same context either way.
  auto short_w = (*w)->generate({greedy(prompt_of(4), 4)});
  auto short_f = (*f)->generate({greedy(prompt_of(4), 4)});
  EXPECT_EQ(short_w->front().output_ids, short_f->front().output_ids);
  auto long_w = (*w)->generate({greedy(prompt_of(60), 30)});
  auto long_f = (*f)->generate({greedy(prompt_of(60), 30)});
  EXPECT_NE(long_w->front().output_ids, long_f->front().output_ids);
}

}  // namespace
}  // namespace loragate
