// Batch invariance on a synthetic model: random mixes of adapters (ranks 1 to
// 64, different target sets), prompt lengths and arrival times, with chunked
// prefill, preemption and rotating slots. Every greedy output must equal the
// same request run alone — an adapter never changes another sequence's output.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "adapters/synth_adapter.h"
#include "engine/engine.h"
#include "model/synth_model.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

struct Fixture {
  std::string model_dir;
  std::vector<std::string> adapter_dirs;
};

const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture fx;
    const std::string root = testing::make_temp_dir("lg-invariance");
    fx.model_dir = root + "/model";
    EXPECT_TRUE(write_synth_model(fx.model_dir, SynthOptions{"tiny", 11, DType::kF32}).is_ok());
    auto config = ModelConfig::load(fx.model_dir);
    EXPECT_TRUE(config.is_ok());
    const std::vector<std::pair<int64_t, std::vector<LoraModule>>> shapes = {
        {1, {LoraModule::kQ, LoraModule::kV}},
        {4, {kAllLoraModules.begin(), kAllLoraModules.end()}},
        {8, {LoraModule::kO, LoraModule::kDown}},
        {16, {LoraModule::kGate, LoraModule::kUp, LoraModule::kK}},
        {32, {kAllLoraModules.begin(), kAllLoraModules.end()}},
        {64, {LoraModule::kQ, LoraModule::kK, LoraModule::kV, LoraModule::kO}},
    };
    for (size_t i = 0; i < shapes.size(); ++i) {
      SynthAdapterOptions o;
      o.rank = shapes[i].first;
      o.lora_alpha = 2.0 * static_cast<double>(o.rank);
      o.targets = shapes[i].second;
      o.seed = 100 + i;
      o.b_std = 0.2;  // strong enough that each adapter changes greedy outputs
      const std::string dir = root + "/adapter" + std::to_string(i);
      EXPECT_TRUE(write_synth_adapter(dir, *config, o).is_ok());
      fx.adapter_dirs.push_back(dir);
    }
    return fx;
  }();
  return f;
}

std::unique_ptr<Engine> make_engine(EngineOptions o) {
  o.max_lora_rank = 64;
  auto e = Engine::load(fixture().model_dir, o);
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  for (size_t i = 0; i < fixture().adapter_dirs.size(); ++i) {
    const std::string name = "adapter" + std::to_string(i);
    EXPECT_TRUE((*e)->adapters()->add(name, fixture().adapter_dirs[i]).is_ok());
    // Loaded now, not on the loader thread: which requests share a step must
    // not depend on how fast the disk is (under ASan, slow loads once kept
    // the batch too small to ever preempt).
    EXPECT_TRUE((*e)->adapters()->load_now(name).is_ok());
  }
  return std::move(e).value();
}

std::vector<GenerationRequest> random_requests(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> adapter(-1, 5), prompt_len(2, 60), new_tokens(4, 30), token(3, 511);
  std::vector<GenerationRequest> out;
  for (int i = 0; i < n; ++i) {
    GenerationRequest r;
    const int len = prompt_len(rng);
    r.prompt_ids.push_back(1);
    for (int t = 1; t < len; ++t) r.prompt_ids.push_back(token(rng));
    const int a = adapter(rng);
    r.adapter = a < 0 ? "" : "adapter" + std::to_string(a);
    r.params.temperature = 0.0f;
    r.params.max_tokens = new_tokens(rng);
    r.params.ignore_eos = true;
    out.push_back(std::move(r));
  }
  return out;
}

TEST(BatchInvarianceTest, MixedAdaptersEqualOneAtATime) {
  const std::vector<GenerationRequest> requests = random_requests(28, 7);

  auto alone_engine = make_engine({});
  std::vector<std::vector<int32_t>> alone;
  for (const GenerationRequest& r : requests) {
    auto out = alone_engine->generate({r});
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    ASSERT_EQ(out->front().finish_reason, FinishReason::kLength) << out->front().error;
    alone.push_back(out->front().output_ids);
  }
  // The adapters must matter, or this test would prove nothing.
  GenerationRequest base = requests[0];
  std::set<std::vector<int32_t>> distinct;
  for (int a = -1; a < 6; ++a) {
    base.adapter = a < 0 ? "" : "adapter" + std::to_string(a);
    distinct.insert(alone_engine->generate({base})->front().output_ids);
  }
  EXPECT_GE(distinct.size(), 5u) << "synthetic adapters barely change outputs";

  EngineOptions o;
  o.max_num_batched_tokens = 24;  // chunked prefill
  o.kv_block_size = 4;
  o.kv_num_blocks = 90;           // tight: forces preemption
  o.max_loras = 3;                // six adapters rotate through three slots
  auto engine = make_engine(o);
  std::map<int64_t, size_t> index_of;
  std::vector<std::vector<int32_t>> batched(requests.size());
  std::mt19937 arrivals(3);
  size_t next = 0;
  while (next < requests.size() || engine->has_unfinished()) {
    // A random number of requests arrive before each step.
    for (int k = std::uniform_int_distribution<int>(0, 3)(arrivals); k > 0 && next < requests.size(); --k, ++next) {
      auto id = engine->add_request(requests[next]);
      ASSERT_TRUE(id.is_ok()) << id.status().to_string();
      index_of[*id] = next;
    }
    ASSERT_TRUE(engine->step().is_ok());
    for (GenerationResult& r : engine->take_finished()) batched[index_of[r.id]] = std::move(r.output_ids);
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(batched[i], alone[i]) << "request " << i << " adapter '" << requests[i].adapter << "'";
  }
  EXPECT_GT(engine->stats().preemptions, 0);
  EXPECT_GT(engine->adapters()->stats().slot_evictions, 0);
}

TEST(BadAdapterTest, FailingAdapterEndsItsRequestsOnlyOthersKeepServing) {
  const std::string root = testing::make_temp_dir("lg-bad-adapter");
  auto config = ModelConfig::load(fixture().model_dir);
  ASSERT_TRUE(config.is_ok());
  // Written for a different base shape: the A matrices are too wide for this one.
  ModelConfig wider = *config;
  wider.hidden_size *= 2;
  wider.head_dim *= 2;
  ASSERT_TRUE(write_synth_adapter(root + "/wrong_shape", wider, {}).is_ok());
  SynthAdapterOptions big;
  big.rank = 128;
  ASSERT_TRUE(write_synth_adapter(root + "/rank_too_big", *config, big).is_ok());

  auto engine = make_engine({});
  ASSERT_TRUE(engine->adapters()->add("wrong_shape", root + "/wrong_shape").is_ok());
  ASSERT_TRUE(engine->adapters()->add("rank_too_big", root + "/rank_too_big").is_ok());
  Status direct = engine->adapters()->load_now("wrong_shape");
  EXPECT_EQ(direct.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(direct.message().find("shape"), std::string::npos) << direct.message();

  std::vector<GenerationRequest> reqs = random_requests(4, 9);
  reqs[1].adapter = "wrong_shape";
  reqs[2].adapter = "rank_too_big";
  auto out = engine->generate(reqs);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  // The request hears which adapter is broken (what a client may see); the
  // operator's listing says why.
  EXPECT_EQ((*out)[1].finish_reason, FinishReason::kError);
  EXPECT_EQ((*out)[1].error_code, StatusCode::kUnavailable);
  EXPECT_NE((*out)[1].error.find("adapter 'wrong_shape' is broken"), std::string::npos) << (*out)[1].error;
  EXPECT_EQ((*out)[1].error.find(root), std::string::npos) << (*out)[1].error;
  EXPECT_EQ((*out)[2].finish_reason, FinishReason::kError);
  EXPECT_NE((*out)[2].error.find("adapter 'rank_too_big' is broken"), std::string::npos) << (*out)[2].error;
  for (const AdapterInfo& info : engine->adapters()->list()) {
    if (info.name == "wrong_shape") {
      EXPECT_NE(info.error.find("shape"), std::string::npos) << info.error;
    }
    if (info.name == "rank_too_big") {
      EXPECT_NE(info.error.find("128"), std::string::npos) << info.error;
    }
  }
  for (size_t i : {0u, 3u}) {
    EXPECT_EQ((*out)[i].finish_reason, FinishReason::kLength);
    auto alone = engine->generate({reqs[i]});
    EXPECT_EQ(alone->front().output_ids, (*out)[i].output_ids);
  }

  GenerationRequest unknown = reqs[0];
  unknown.adapter = "never_registered";
  Status s = engine->validate_request(unknown);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("never_registered"), std::string::npos);
}

TEST(AdapterRemovalTest, RemovedAdapterRefusesNewRequestsAndFreesItsSlot) {
  auto engine = make_engine({});
  std::vector<GenerationRequest> reqs = random_requests(1, 5);
  reqs[0].adapter = "adapter2";
  ASSERT_TRUE(engine->add_request(reqs[0]).is_ok());
  GenerationRequest queued = reqs[0];
  ASSERT_TRUE(engine->add_request(queued).is_ok());
  ASSERT_TRUE(engine->adapters()->remove("adapter2").is_ok());
  EXPECT_EQ(engine->validate_request(reqs[0]).code(), StatusCode::kNotFound);
  while (engine->has_unfinished()) ASSERT_TRUE(engine->step().is_ok());
  auto done = engine->take_finished();
  ASSERT_EQ(done.size(), 2u);
  for (const GenerationResult& r : done) {
    EXPECT_EQ(r.finish_reason, FinishReason::kLength) << "requests accepted before the removal finish: " << r.error;
  }
  ASSERT_TRUE(engine->step().is_ok());  // collects the removed adapter
  EXPECT_EQ(engine->adapters()->stats().slots_used, 0);
  EXPECT_TRUE(engine->adapters()->add("adapter2", fixture().adapter_dirs[2]).is_ok()) << "the name is free again";
}

}  // namespace
}  // namespace loragate
