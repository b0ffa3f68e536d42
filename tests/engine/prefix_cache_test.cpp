// The prefix cache end to end in the engine: a request that reuses cached
// blocks gives bit for bit the logprobs and tokens of a cold run (the same
// request on an engine with prefix_caching off), for shared prefixes,
// partial-block tails, prompts that are prefixes of others, mixed adapters
// in one batch, chunked prefill, preemption, eviction, sliding windows and
// scored prompts; and nothing is reused across adapters (same name, new
// content included), salts or a reset.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <random>

#include "adapters/synth_adapter.h"
#include "engine/engine.h"
#include "model/synth_model.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

constexpr int32_t kBlock = 16;

struct PrefixFixture {
  std::string root, model_dir;
  std::vector<std::string> adapter_dirs;  // 0, 1: different weights; 2: adapter 0's weights, another alpha
};

const PrefixFixture& fixture() {
  static const PrefixFixture f = [] {
    PrefixFixture fx;
    fx.root = testing::make_temp_dir("lg-prefix");
    fx.model_dir = fx.root + "/model";
    EXPECT_TRUE(write_synth_model(fx.model_dir, SynthOptions{"tiny", 23, DType::kF32}).is_ok());
    auto config = ModelConfig::load(fx.model_dir);
    EXPECT_TRUE(config.is_ok());
    for (int i = 0; i < 3; ++i) {
      SynthAdapterOptions o;
      o.rank = 8;
      o.seed = i == 2 ? 300 : 300 + i;
      o.lora_alpha = i == 2 ? 8 : 16;
      o.b_std = 0.2;
      const std::string dir = fx.root + "/adapter" + std::to_string(i);
      EXPECT_TRUE(write_synth_adapter(dir, *config, o).is_ok());
      fx.adapter_dirs.push_back(dir);
    }
    return fx;
  }();
  return f;
}

std::unique_ptr<Engine> make_engine(bool caching, EngineOptions o = {}, const std::string& model_dir = "") {
  o.prefix_caching = caching;
  o.kv_block_size = kBlock;
  o.max_lora_rank = 8;
  auto e = Engine::load(model_dir.empty() ? fixture().model_dir : model_dir, o);
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  if (!e.is_ok()) return nullptr;
  if ((*e)->adapters() != nullptr && model_dir.empty()) {
    for (int i = 0; i < 3; ++i) {
      const std::string name = "a" + std::to_string(i);
      EXPECT_TRUE((*e)->adapters()->add(name, fixture().adapter_dirs[i]).is_ok());
      EXPECT_TRUE((*e)->adapters()->load_now(name).is_ok());
    }
  }
  return std::move(e).value();
}

std::vector<int32_t> tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> token(3, 500);
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(token(rng));
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

GenerationRequest request(std::vector<int32_t> prompt, const std::string& adapter = "", int max_tokens = 8) {
  GenerationRequest r;
  r.prompt_ids = std::move(prompt);
  r.adapter = adapter;
  r.params.temperature = 0.0f;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  r.params.logprobs = 5;
  return r;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void expect_same_logprobs(const std::vector<TokenLogprobs>& a, const std::vector<TokenLogprobs>& b,
                          const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].token, b[i].token) << what << " position " << i;
    EXPECT_TRUE(same_bits(a[i].logprob, b[i].logprob)) << what << " position " << i << ": " << a[i].logprob
                                                       << " vs " << b[i].logprob;
    ASSERT_EQ(a[i].top.size(), b[i].top.size()) << what;
    for (size_t k = 0; k < a[i].top.size(); ++k) {
      EXPECT_EQ(a[i].top[k].first, b[i].top[k].first) << what << " position " << i;
      EXPECT_TRUE(same_bits(a[i].top[k].second, b[i].top[k].second)) << what << " position " << i;
    }
  }
}

// Every result equals the same request's cold result, position by position.
void expect_same_results(const std::vector<GenerationResult>& warm, const std::vector<GenerationResult>& cold) {
  ASSERT_EQ(warm.size(), cold.size());
  for (size_t i = 0; i < warm.size(); ++i) {
    const std::string what = "request " + std::to_string(i);
    EXPECT_EQ(warm[i].output_ids, cold[i].output_ids) << what;
    expect_same_logprobs(warm[i].logprobs, cold[i].logprobs, what + " logprobs");
    expect_same_logprobs(warm[i].prompt_logprobs, cold[i].prompt_logprobs, what + " prompt_logprobs");
  }
}

std::vector<GenerationResult> run(Engine& e, std::vector<GenerationRequest> requests) {
  auto r = e.generate(std::move(requests));
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? std::move(r).value() : std::vector<GenerationResult>{};
}

TEST(PrefixCacheTest, ASharedPrefixIsReusedAndEqualsAColdRun) {
  auto warm = make_engine(true);
  auto cold = make_engine(false);
  const std::vector<int32_t> system = tokens(50, 1);  // 3 full blocks and 2 tokens
  const auto first = run(*warm, {request(concat(system, tokens(9, 2)))});
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].cached_tokens, 0);

  std::vector<GenerationRequest> later = {request(concat(system, tokens(7, 3))),  // another user turn
                                          request(concat(system, tokens(9, 2))),  // the same prompt again
                                          request(std::vector<int32_t>(system.begin(), system.begin() + 20)),
                                          request(std::vector<int32_t>(system.begin(), system.begin() + 33)),
                                          request(std::vector<int32_t>(system.begin(), system.begin() + 48))};
  const auto w = run(*warm, later);
  const auto c = run(*cold, later);
  expect_same_results(w, c);
  ASSERT_EQ(w.size(), 5u);
  EXPECT_EQ(w[0].cached_tokens, 48);
  EXPECT_EQ(w[1].cached_tokens, 48);  // (59 - 1) / 16 blocks: the last token is always computed
  EXPECT_EQ(w[2].cached_tokens, 16);  // a prompt that is a prefix of the cached one
  EXPECT_EQ(w[3].cached_tokens, 32);
  EXPECT_EQ(w[4].cached_tokens, 32);  // 48 tokens: the third block holds the last one
  for (const GenerationResult& r : c) EXPECT_EQ(r.cached_tokens, 0);

  const EngineStats s = warm->stats();
  EXPECT_EQ(s.prefix_cache_hits, 48 + 48 + 16 + 32 + 32);
  EXPECT_EQ(s.prefix_cache_queries, 59 + 57 + 59 + 20 + 33 + 48);
  EXPECT_GT(s.prefix_cache_blocks, 3);
  EXPECT_EQ(cold->stats().prefix_cache_hits, 0);
}

TEST(PrefixCacheTest, OutputTokensAreCachedForTheNextTurn) {
  auto warm = make_engine(true);
  auto cold = make_engine(false);
  const std::vector<int32_t> turn1 = tokens(21, 4);
  const auto r1 = run(*warm, {request(turn1, "a0", 30)});
  ASSERT_EQ(r1.size(), 1u);
  // The next turn's prompt is the conversation so far plus a new message.
  const std::vector<int32_t> turn2 = concat(concat(turn1, r1[0].output_ids), tokens(5, 5));
  const auto w = run(*warm, {request(turn2, "a0")});
  const auto c = run(*cold, {request(turn2, "a0")});
  expect_same_results(w, c);
  EXPECT_EQ(w[0].cached_tokens, 48);  // 21 + 30 = 51 tokens were computed: 3 full blocks (the 51st never is)
}

TEST(PrefixCacheTest, MixedAdaptersInOneBatchShareOnlyTheirOwnBlocks) {
  auto warm = make_engine(true);
  auto cold = make_engine(false);
  const std::vector<int32_t> system = tokens(40, 6);
  run(*warm, {request(concat(system, tokens(3, 7)), "a0")});
  std::vector<GenerationRequest> batch;
  for (int i = 0; i < 8; ++i) {
    const std::string adapter = i % 3 == 0 ? "a0" : i % 3 == 1 ? "a1" : "";
    batch.push_back(request(concat(system, tokens(4 + i, 10 + i)), adapter, 6 + i));
  }
  const auto w = run(*warm, batch);
  const auto c = run(*cold, batch);
  expect_same_results(w, c);
  EXPECT_EQ(w[0].cached_tokens, 32);  // a0: cached before
  EXPECT_EQ(w[1].cached_tokens, 0);   // a1: never from a0's blocks
  EXPECT_EQ(w[2].cached_tokens, 0);   // the base alone: neither
  // Running in the same batch, none found the others' blocks: they were not computed yet.
  const auto again = run(*warm, {request(concat(system, tokens(2, 30)), "a1"), request(concat(system, tokens(2, 31)))});
  EXPECT_EQ(again[0].cached_tokens, 32);
  EXPECT_EQ(again[1].cached_tokens, 32);
}

TEST(PrefixCacheTest, AnAdapterWithOtherContentNeverSharesEvenUnderTheSameName) {
  auto warm = make_engine(true);
  auto cold = make_engine(false);
  const std::vector<int32_t> prompt = tokens(40, 8);
  run(*warm, {request(prompt, "a0")});
  // "a0" is removed and registered again with a1's weights.
  ASSERT_TRUE(warm->adapters()->remove("a0").is_ok());
  warm->collect_removed_adapters();
  ASSERT_TRUE(warm->adapters()->add("a0", fixture().adapter_dirs[1]).is_ok());
  ASSERT_TRUE(warm->adapters()->load_now("a0").is_ok());
  const auto w = run(*warm, {request(prompt, "a0")});
  const auto c = run(*cold, {request(prompt, "a1")});
  EXPECT_EQ(w[0].cached_tokens, 0);
  expect_same_results(w, c);
}

TEST(PrefixCacheTest, TheSameWeightsWithAnotherAlphaNeverShare) {
  // a0 and a2 have the same weights file; only adapter_config.json's lora_alpha differs.
  std::ifstream x(fixture().adapter_dirs[0] + "/adapter_model.safetensors", std::ios::binary);
  std::ifstream y(fixture().adapter_dirs[2] + "/adapter_model.safetensors", std::ios::binary);
  const std::string bx((std::istreambuf_iterator<char>(x)), {}), by((std::istreambuf_iterator<char>(y)), {});
  ASSERT_EQ(bx, by);
  auto warm = make_engine(true);
  auto cold = make_engine(false);
  const std::vector<int32_t> prompt = tokens(40, 9);
  run(*warm, {request(prompt, "a0")});
  const auto w = run(*warm, {request(prompt, "a2")});
  const auto c = run(*cold, {request(prompt, "a2")});
  EXPECT_EQ(w[0].cached_tokens, 0);
  expect_same_results(w, c);
}

TEST(PrefixCacheTest, SaltsSeparateTenants) {
  auto warm = make_engine(true);
  const std::vector<int32_t> prompt = tokens(40, 11);
  GenerationRequest a = request(prompt);
  a.cache_salt = "tenant-a";
  run(*warm, {a});
  GenerationRequest b = request(prompt);
  b.cache_salt = "tenant-b";
  GenerationRequest none = request(prompt);
  const auto r = run(*warm, {b, none});
  EXPECT_EQ(r[0].cached_tokens, 0);
  EXPECT_EQ(r[1].cached_tokens, 0);
  GenerationRequest a2 = request(prompt);
  a2.cache_salt = "tenant-a";
  EXPECT_EQ(run(*warm, {a2})[0].cached_tokens, 32);
}

TEST(PrefixCacheTest, ResetForgetsAndOffNeverCaches) {
  auto warm = make_engine(true);
  const std::vector<int32_t> prompt = tokens(40, 12);
  run(*warm, {request(prompt)});
  EXPECT_EQ(run(*warm, {request(prompt)})[0].cached_tokens, 32);
  warm->reset_prefix_cache();
  EXPECT_EQ(warm->stats().prefix_cache_blocks, 0);
  EXPECT_EQ(run(*warm, {request(prompt)})[0].cached_tokens, 0);
  EXPECT_EQ(run(*warm, {request(prompt)})[0].cached_tokens, 32);

  auto cold = make_engine(false);
  run(*cold, {request(prompt)});
  EXPECT_EQ(run(*cold, {request(prompt)})[0].cached_tokens, 0);
  EXPECT_EQ(cold->stats().prefix_cache_queries, 0);
}

TEST(PrefixCacheTest, ChunkedPrefillAndPreemptionWithHitsEqualColdRuns) {
  EngineOptions o;
  o.max_num_batched_tokens = 7;  // prompts prefill over many steps
  o.kv_num_blocks = 10;          // 160 tokens: the batch below preempts
  auto warm = make_engine(true, o);
  auto cold = make_engine(false, o);
  const std::vector<int32_t> system = tokens(35, 13);
  run(*warm, {request(concat(system, tokens(2, 14)))});
  std::vector<GenerationRequest> batch;
  for (int i = 0; i < 6; ++i) batch.push_back(request(concat(system, tokens(3 + i, 20 + i)), i % 2 ? "a1" : "", 20));
  const auto w = run(*warm, batch);
  const auto c = run(*cold, batch);
  expect_same_results(w, c);
  int32_t preempted = 0;
  for (const GenerationResult& r : w) preempted += r.preemptions;
  EXPECT_GT(preempted, 0) << "the pool was meant to be too small for the batch";
  EXPECT_EQ(w[0].cached_tokens, 32);
}

TEST(PrefixCacheTest, EvictedBlocksAreRecomputedCorrectly) {
  EngineOptions o;
  o.kv_num_blocks = 8;
  auto warm = make_engine(true, o);
  auto cold = make_engine(false, o);
  const std::vector<int32_t> prompt = tokens(60, 15);
  run(*warm, {request(prompt)});
  // Other prompts take the whole pool: the first one's blocks are evicted, tail first.
  run(*warm, {request(tokens(60, 16)), request(tokens(40, 17))});
  const auto w = run(*warm, {request(prompt)});
  const auto c = run(*cold, {request(prompt)});
  expect_same_results(w, c);
  EXPECT_LT(w[0].cached_tokens, 48);
  // And once more, from the blocks just computed.
  const auto w2 = run(*warm, {request(prompt)});
  expect_same_results(w2, c);
  EXPECT_EQ(w2[0].cached_tokens, 48);
}

TEST(PrefixCacheTest, ScoredPromptsReuseOnlyBeforeTheirFirstScoredPosition) {
  auto warm = make_engine(true);
  auto cold = make_engine(false);
  const std::vector<int32_t> prompt = tokens(60, 18);
  run(*warm, {request(prompt)});
  std::vector<GenerationRequest> scored;
  for (int64_t from : {1, 20, 50}) {
    GenerationRequest r = request(prompt, "", 2);
    r.prompt_logprobs = 3;
    r.score_from = from;  // token `from` is scored with the logits at position from - 1
    scored.push_back(std::move(r));
  }
  GenerationRequest pure = request(prompt, "", 0);  // a pure score: echo with max_tokens 0
  pure.prompt_logprobs = 0;
  pure.score_from = 40;
  scored.push_back(std::move(pure));
  const auto w = run(*warm, scored);
  const auto c = run(*cold, scored);
  expect_same_results(w, c);
  EXPECT_EQ(w[0].cached_tokens, 0);   // position 0's logits are wanted
  EXPECT_EQ(w[1].cached_tokens, 16);  // positions 0..18 may come from the cache: one block
  EXPECT_EQ(w[2].cached_tokens, 48);
  EXPECT_EQ(w[3].cached_tokens, 32);
  EXPECT_EQ(w[3].prompt_logprobs.size(), 20u);
}

TEST(PrefixCacheTest, SlidingWindowModelsReuseBlocksExactly) {
  const std::string dir = testing::make_temp_dir("lg-prefix-window");
  ASSERT_TRUE(write_synth_model(dir, SynthOptions{"tiny", 29, DType::kF32}).is_ok());
  auto config = ModelConfig::load(dir);
  ASSERT_TRUE(config.is_ok());
  config->architecture = "MistralForCausalLM";
  config->model_type = "mistral";
  config->sliding_window = 24;
  std::ofstream(dir + "/config.json") << config->to_json();
  EngineOptions o;
  o.max_num_batched_tokens = 20;
  o.max_loras = 0;
  auto warm = make_engine(true, o, dir);
  auto cold = make_engine(false, o, dir);
  const std::vector<int32_t> system = tokens(70, 19);
  run(*warm, {request(concat(system, tokens(5, 20)), "", 30)});
  std::vector<GenerationRequest> batch = {request(concat(system, tokens(6, 21)), "", 30),
                                          request(concat(system, tokens(5, 20)), "", 12)};
  const auto w = run(*warm, batch);
  const auto c = run(*cold, batch);
  expect_same_results(w, c);
  EXPECT_EQ(w[0].cached_tokens, 64);
  EXPECT_EQ(w[1].cached_tokens, 64);
}

TEST(PrefixCacheTest, EnginesOfDifferentBasesHaveDifferentKeys) {
  // Each engine owns its KV pool, so blocks never cross engines; the key
  // still names the weights and dtype, so a cache shared in the future could
  // not mix them either. Here: the same prompt on another base is cold.
  const std::string other = testing::make_temp_dir("lg-prefix-base");
  ASSERT_TRUE(write_synth_model(other, SynthOptions{"tiny", 24, DType::kF32}).is_ok());
  EngineOptions o;
  o.max_loras = 0;
  auto a = make_engine(true, o, other);
  auto b = make_engine(false, o, other);
  const std::vector<int32_t> prompt = tokens(40, 22);
  auto first = make_engine(true);
  run(*first, {request(prompt)});
  const auto w = run(*a, {request(prompt)});
  EXPECT_EQ(w[0].cached_tokens, 0);
  expect_same_results(w, run(*b, {request(prompt)}));
}

// A hit is exact in every storage type: each one's kernels give a token the
// same K/V whether it is computed in a long prefill, a short one or a decode.
class PrefixCacheDtypeTest : public ::testing::TestWithParam<WeightType> {};

TEST_P(PrefixCacheDtypeTest, HitsEqualColdRuns) {
  EngineOptions o;
  o.weight_dtype = GetParam();
  o.max_num_batched_tokens = 64;
  auto warm = make_engine(true, o);
  auto cold = make_engine(false, o);
  const std::vector<int32_t> system = tokens(70, 40);
  run(*warm, {request(concat(system, tokens(3, 41)), "a0")});
  std::vector<GenerationRequest> batch = {request(concat(system, tokens(5, 42)), "a0", 12),
                                          request(concat(system, tokens(9, 43)), "", 12),
                                          request(concat(system, tokens(3, 41)), "a0", 12)};
  const auto w = run(*warm, batch);
  const auto c = run(*cold, batch);
  expect_same_results(w, c);
  EXPECT_EQ(w[0].cached_tokens, 64);
  EXPECT_EQ(w[2].cached_tokens, 64);
}

INSTANTIATE_TEST_SUITE_P(AllStorageTypes, PrefixCacheDtypeTest,
                         ::testing::Values(WeightType::kF32, WeightType::kBF16, WeightType::kInt8,
                                           WeightType::kInt8Outlier, WeightType::kInt4, WeightType::kInt4AsymG64),
                         [](const ::testing::TestParamInfo<WeightType>& info) {
                           std::string name(weight_type_name(info.param));
                           for (char& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return name;
                         });

}  // namespace
}  // namespace loragate
