// Golden multi-LoRA tests: stories260K with PEFT adapters a, b and c must
// reproduce the reference token for token alone, all 24 cases mixed in one
// batch, with chunked prefill, under preemption, and with fewer slots than
// adapters so they rotate through slots.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

struct LoraCase {
  std::string prompt, variant;  // variant: "base", "a", "b" or "c"
  std::vector<int32_t> prompt_ids, generated_ids;
};

class GoldenLoraTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("models/golden.json");
    LG_REQUIRE_SHARED("models/stories260K-lora/a");
    std::ifstream in(testing::shared_dir() + "/models/golden.json");
    const nlohmann::json g = nlohmann::json::parse(in);
    for (const auto& c : g.at("cases")) {
      for (const char* v : {"base", "a", "b", "c"}) {
        cases_.push_back({c.at("prompt").get<std::string>(), v, c.at("prompt_ids").get<std::vector<int32_t>>(),
                          c.at("outputs").at(v).at("generated_ids").get<std::vector<int32_t>>()});
      }
    }
    ASSERT_EQ(cases_.size(), 24u);
  }

  std::unique_ptr<Engine> make_engine(EngineOptions options) {
    auto engine = Engine::load(testing::shared_dir() + "/models/stories260K", options);
    EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
    if (!engine.is_ok()) return nullptr;
    for (const char* name : {"a", "b", "c"}) {
      Status s = (*engine)->adapters()->add(name, testing::shared_dir() + "/models/stories260K-lora/" + name);
      EXPECT_TRUE(s.is_ok()) << s.to_string();
      // Loaded up front, so preemption and slot rotation do not hang on
      // how fast the loader thread happens to be.
      s = (*engine)->adapters()->load_now(name);
      EXPECT_TRUE(s.is_ok()) << s.to_string();
    }
    return std::move(engine).value();
  }

  static GenerationRequest request(const LoraCase& c) {
    GenerationRequest r;
    r.prompt_ids = c.prompt_ids;
    r.adapter = c.variant == "base" ? "" : c.variant;
    r.params.temperature = 0.0f;
    r.params.max_tokens = 48;
    return r;
  }

  void expect_all_in_one_batch(Engine& engine) {
    std::vector<GenerationRequest> reqs;
    for (const LoraCase& c : cases_) reqs.push_back(request(c));
    auto results = engine.generate(std::move(reqs));
    ASSERT_TRUE(results.is_ok()) << results.status().to_string();
    for (size_t i = 0; i < cases_.size(); ++i) {
      EXPECT_EQ((*results)[i].output_ids, cases_[i].generated_ids)
          << "adapter " << cases_[i].variant << ", prompt '" << cases_[i].prompt << "' " << (*results)[i].error;
    }
  }

  std::vector<LoraCase> cases_;
};

TEST_F(GoldenLoraTest, OneRequestAtATime) {
  auto engine = make_engine({});
  for (const LoraCase& c : cases_) {
    auto results = engine->generate({request(c)});
    ASSERT_TRUE(results.is_ok()) << results.status().to_string();
    EXPECT_EQ(results->front().output_ids, c.generated_ids) << "adapter " << c.variant << ", prompt '" << c.prompt << "'";
    EXPECT_EQ(results->front().adapter, c.variant == "base" ? "" : c.variant);
  }
}

TEST_F(GoldenLoraTest, All24CasesInOneMixedBatch) {
  EngineOptions o;
  o.max_num_batched_tokens = 4096;
  auto engine = make_engine(o);
  expect_all_in_one_batch(*engine);
}

TEST_F(GoldenLoraTest, ChunkedPrefill) {
  EngineOptions o;
  o.max_num_batched_tokens = 16;
  auto engine = make_engine(o);
  expect_all_in_one_batch(*engine);
}

TEST_F(GoldenLoraTest, PreemptionUnderASmallKvPool) {
  EngineOptions o;
  o.kv_block_size = 4;
  o.kv_num_blocks = 60;
  o.max_num_batched_tokens = 64;
  auto engine = make_engine(o);
  expect_all_in_one_batch(*engine);
  EXPECT_GT(engine->stats().preemptions, 0) << "the pool was meant to force preemption";
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
  EXPECT_EQ(engine->adapters()->stats().slots_pinned, 0) << "finished sequences must unpin their slots";
}

TEST_F(GoldenLoraTest, TwoSlotsForThreeAdaptersRotate) {
  EngineOptions o;
  o.max_loras = 2;
  auto engine = make_engine(o);
  expect_all_in_one_batch(*engine);
  const AdapterCacheStats s = engine->adapters()->stats();
  EXPECT_GT(s.slot_evictions, 0) << "three adapters through two slots must evict";
  EXPECT_EQ(s.slots_pinned, 0);
}

// The PEFT merge_and_unload alternative (W + s·B·A folded into the weights)
// must give the same tokens as the unmerged adapter.
TEST_F(GoldenLoraTest, MergedWeightsGiveTheAdapterOutputs) {
  const std::string root = testing::shared_dir() + "/models/";
  auto base = ModelConfig::load(root + "stories260K");
  ASSERT_TRUE(base.is_ok());
  for (const char* name : {"a", "c"}) {
    auto adapter = LoraAdapter::load(root + "stories260K-lora/" + name, *base, 64);
    ASSERT_TRUE(adapter.is_ok()) << adapter.status().to_string();
    auto engine = Engine::load(root + "stories260K", {}, adapter->get());
    ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
    for (const LoraCase& c : cases_) {
      if (c.variant != name) continue;
      GenerationRequest r = request(c);
      r.adapter = "";  // the adapter lives in the weights now
      auto out = (*engine)->generate({r});
      ASSERT_TRUE(out.is_ok());
      EXPECT_EQ(out->front().output_ids, c.generated_ids) << "merged " << name << ", prompt '" << c.prompt << "'";
    }
  }
}

}  // namespace
}  // namespace loragate
